/* registry.c - C modules by name (see registry.h). */
#include "core/registry.h"

#include <string.h>

/* Module names: [A-Za-z0-9_.-], not empty, no "..". */
static int valid_name(const char *name) {
  const char *p;
  if (*name == '\0' || *name == '.' || strstr(name, "..") != NULL) return 0;
  for (p = name; *p; p++) {
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
          (*p >= '0' && *p <= '9') || *p == '_' || *p == '.' || *p == '-'))
      return 0;
  }
  return 1;
}

void ludo__registry_init(ludo__registry_t *r, ludo__alloc_t *heap) {
  memset(r, 0, sizeof *r);
  r->heap = heap;
}

void ludo__registry_free(ludo__registry_t *r) {
  size_t i;
  for (i = 0; i < r->n; i++)
    ludo__free(r->heap, r->v[i].name, strlen(r->v[i].name) + 1);
  if (r->v) ludo__free(r->heap, r->v, r->cap * sizeof *r->v);
  r->v = NULL;
  r->n = r->cap = 0;
}

const ludo__cmod_t *ludo__registry_find(const ludo__registry_t *r,
                                        const char *name) {
  size_t i;
  if (r == NULL) return NULL;
  for (i = 0; i < r->n; i++)
    if (strcmp(r->v[i].name, name) == 0) return &r->v[i];
  return NULL;
}

int ludo__registry_add(ludo__registry_t *r, const char *name,
                       lua_CFunction open, void *ud) {
  ludo__cmod_t *e;
  if (name == NULL || open == NULL || !valid_name(name)) return LUDO_EINVAL;
  e = (ludo__cmod_t *)ludo__registry_find(r, name);
  if (e == NULL) {
    if (r->n == r->cap) {
      size_t ncap = r->cap ? r->cap * 2 : 8;
      ludo__cmod_t *nv = ludo__realloc(r->heap, r->v, r->cap * sizeof *nv,
                                       ncap * sizeof *nv);
      if (nv == NULL) return LUDO_ENOMEM;
      r->v = nv;
      r->cap = ncap;
    }
    e = &r->v[r->n];
    e->name = ludo__strndup(r->heap, name, strlen(name));
    if (e->name == NULL) return LUDO_ENOMEM;
    r->n++;
  }
  e->open = open;
  e->ud = ud;
  return 0;
}

