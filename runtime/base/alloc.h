/* alloc.h - the one allocator seam: every C allocation of a runtime goes
 * through a ludo__alloc_t, which forwards to the host's allocator hook and
 * counts live bytes. */
#ifndef LUDO_BASE_ALLOC_H
#define LUDO_BASE_ALLOC_H

#include <stddef.h>

#include "ludo_defs.h"

typedef struct ludo__alloc_s {
  ludo_alloc_fn fn; /* lua_Alloc contract; never NULL after init */
  void *ud;
  size_t live;      /* bytes currently allocated through this seam */
} ludo__alloc_t;

/* Sets up `a` with `fn`/`ud`, or the C library allocator when fn is NULL. */
void ludo__alloc_init(ludo__alloc_t *a, ludo_alloc_fn fn, void *ud);

/* The default allocator (malloc/realloc/free) with lua_Alloc's contract. */
void *ludo__alloc_default(void *ud, void *ptr, size_t osize, size_t nsize);

/* lua_Alloc-compatible entry that accounts into the ludo__alloc_t passed as
 * `ud`. Returns NULL on failure and leaves ptr untouched. */
void *ludo__alloc_fn(void *ud, void *ptr, size_t osize, size_t nsize);

/* Convenience wrappers. Sizes must match what was allocated. */
void *ludo__malloc(ludo__alloc_t *a, size_t n);
void *ludo__calloc(ludo__alloc_t *a, size_t n);
void *ludo__realloc(ludo__alloc_t *a, void *p, size_t osize, size_t nsize);
void ludo__free(ludo__alloc_t *a, void *p, size_t n);
/* Copies `n` bytes of `s` and a NUL. Caller frees with ludo__free(a, p, n+1). */
char *ludo__strndup(ludo__alloc_t *a, const char *s, size_t n);

#endif
