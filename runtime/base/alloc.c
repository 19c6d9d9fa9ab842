/* alloc.c - allocator seam with live-byte accounting. */
#include "base/alloc.h"

#include <stdlib.h>
#include <string.h>

void *ludo__alloc_default(void *ud, void *ptr, size_t osize, size_t nsize) {
  (void)ud;
  (void)osize;
  if (nsize == 0) {
    free(ptr);
    return NULL;
  }
  return realloc(ptr, nsize);
}

void ludo__alloc_init(ludo__alloc_t *a, ludo_alloc_fn fn, void *ud) {
  a->fn = fn ? fn : ludo__alloc_default;
  a->ud = fn ? ud : NULL;
  a->live = 0;
}

void *ludo__alloc_fn(void *ud, void *ptr, size_t osize, size_t nsize) {
  ludo__alloc_t *a = ud;
  void *p;
  if (ptr == NULL) osize = 0;
  p = a->fn(a->ud, ptr, osize, nsize);
  if (nsize == 0) {
    a->live -= osize;
    return NULL;
  }
  if (p != NULL) a->live += nsize - osize;
  return p;
}

void *ludo__malloc(ludo__alloc_t *a, size_t n) {
  return ludo__alloc_fn(a, NULL, 0, n ? n : 1);
}

void *ludo__calloc(ludo__alloc_t *a, size_t n) {
  void *p = ludo__malloc(a, n);
  if (p) memset(p, 0, n ? n : 1);
  return p;
}

void *ludo__realloc(ludo__alloc_t *a, void *p, size_t osize, size_t nsize) {
  return ludo__alloc_fn(a, p, osize, nsize);
}

void ludo__free(ludo__alloc_t *a, void *p, size_t n) {
  if (p != NULL) ludo__alloc_fn(a, p, n ? n : 1, 0);
}

char *ludo__strndup(ludo__alloc_t *a, const char *s, size_t n) {
  char *p = ludo__malloc(a, n + 1);
  if (p == NULL) return NULL;
  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}
