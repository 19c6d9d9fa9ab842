/* errors.h - names and descriptions of the LUDO_E* codes (ludo_defs.h),
 * for every layer. */
#ifndef LUDO_BASE_ERRORS_H
#define LUDO_BASE_ERRORS_H

#include "ludo_defs.h"

/* The symbolic name of a code ("ENOMEM"), "OK" for 0, or "EUNKNOWN".
 * Static string. */
const char *ludo__err_name(int err);

/* A static English description of a code. */
const char *ludo__strerror(int err);

/* The code whose name is the `n` bytes at `name` ("ETIMEOUT"), or 0. */
int ludo__err_code(const char *name, size_t n);

#endif
