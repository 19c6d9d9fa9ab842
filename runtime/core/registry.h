/* registry.h - C modules that session states can require by name: the
 * runtime's registry holds ludo's own (ludo.core, ludo.json, ludo.re, and
 * later net, sandbox and LLM modules) and those the host registers; each
 * environment has one more for its host modules. */
#ifndef LUDO_CORE_REGISTRY_H
#define LUDO_CORE_REGISTRY_H

#include <lua.h>
#include <stddef.h>

#include "base/alloc.h"
#include "ludo_defs.h"

/* A C module that sessions can require by name. `open` is called like a
 * luaopen_* function (the module name as its argument) with `ud` as its
 * first upvalue (a light userdata), and returns the module's value. */
typedef struct ludo__cmod_s {
  char *name;          /* owned copy */
  lua_CFunction open;
  void *ud;            /* borrowed; the registrant keeps it alive */
} ludo__cmod_t;

/* A registry of C modules: the runtime has one (ludo's own modules and
 * what the host registers), each environment one (its host modules). */
typedef struct ludo__registry_s {
  ludo__alloc_t *heap; /* borrowed */
  ludo__cmod_t *v;
  size_t n, cap;
} ludo__registry_t;

void ludo__registry_init(ludo__registry_t *r, ludo__alloc_t *heap);
void ludo__registry_free(ludo__registry_t *r);
/* Adds or replaces module `name` (copied). Returns 0, LUDO_EINVAL (a name
 * with characters outside [A-Za-z0-9_.-]) or LUDO_ENOMEM. */
int ludo__registry_add(ludo__registry_t *r, const char *name,
                       lua_CFunction open, void *ud);
/* The entry for `name`, or NULL. */
const ludo__cmod_t *ludo__registry_find(const ludo__registry_t *r,
                                        const char *name);

#endif
