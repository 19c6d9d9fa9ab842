/* realtext.h - a double as the shortest decimal text that reads back as
 * the same value. */
#ifndef LUDO_BASE_REALTEXT_H
#define LUDO_BASE_REALTEXT_H

#include <stddef.h>

/* Writes d into out[0..n) (NUL-terminated; n >= 32 holds any) with the
 * fewest significant digits, 15 to 17, that strtod reads back as d: 0.1,
 * 1e+30, 0.29999999999999993. NaN and infinities as printf writes them. */
void ludo__real_text(double d, char *out, size_t n);

#endif
