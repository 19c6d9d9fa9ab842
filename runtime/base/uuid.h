/* uuid.h - random version-4 UUID strings. */
#ifndef LUDO_BASE_UUID_H
#define LUDO_BASE_UUID_H

#define LUDO__UUID_LEN 36

/* Writes a random UUID v4 and a NUL into out[37]. Returns 0 or -1. */
int ludo__uuid4(char out[LUDO__UUID_LEN + 1]);

#endif
