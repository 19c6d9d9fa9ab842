/* redact.h - hides heap addresses in text that leaves a sandbox. */
#ifndef LUDO_BASE_REDACT_H
#define LUDO_BASE_REDACT_H

#include <stddef.h>

/* Rewrites, in place, every address as Lua prints one (": 0x" followed by
 * at least 4 hex digits, as in "table: 0x55b640e92cd0" from tostring or
 * luaL_tolstring) to ": 0x?", and returns the new length (never more than
 * `len`). The text need not be NUL-terminated; when it is, and the NUL
 * lies within len + 1 bytes, it is kept at the new end. */
size_t ludo__redact_addresses(char *s, size_t len);

#endif
