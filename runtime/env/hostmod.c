/* hostmod.c - host modules registered for a whole runtime
 * (ludo_runtime_add_module): owned copies of the host's descriptions,
 * entered in the runtime's registry of C modules, where every session and
 * script of the runtime finds them after the environment's own. */
#include <dlfcn.h>
#include <string.h>

#include <lua.h>

#include "base/errors.h"
#include "env/env.h"

typedef struct ludo__hostmod_s {
  ludo_host_module_t m;          /* the copy the loader gets as upvalue */
  struct ludo__hostmod_s *next;  /* in rt->hostmods */
} hostmod_t;

/* "ludo" and "ludo.*" are ludo's own names: a host module there would
 * shadow ludo's modules (C modules are found before Lua files). */
static int reserved(const char *name) {
  return strncmp(name, "ludo", 4) == 0 && (name[4] == '\0' || name[4] == '.');
}

/* Whether the program's Lua API is another copy than the one ludo's
 * states run on: the first lua_settop in the process's global scope is
 * not ludo's. Host functions are compiled against lua.h and call the
 * global one; libludo.so carries ludo's patched Lua and binds its own
 * calls to it, so a program that also links the system's liblua5.4 ahead
 * of it would run two Lua copies, whose structures differ, on one state.
 * NULL from dlsym: nothing exported (a static program), one copy. */
static int foreign_lua(void) {
  /* The main program's handle: RTLD_DEFAULT from a library linked with
   * -Bsymbolic (DT_SYMBOLIC) would search the library first. */
  void *prog = dlopen(NULL, RTLD_LAZY), *global;
  if (prog == NULL) return 0;
  global = dlsym(prog, "lua_settop");
  dlclose(prog);
  return global != NULL && global != (void *)lua_settop;
}

int ludo__hostmod_check(ludo_runtime_t *rt, const ludo__registry_t *r,
                        const ludo_host_module_t *m, const char *where) {
  if (m->funcs != NULL && foreign_lua()) {
    ludo__runtime_seterr(rt, "EINVAL: host module '%.200s': this program "
                             "links another Lua than ludo's (liblua5.4 "
                             "with libludo.so?); host functions would call "
                             "it on ludo's states: link Lua only through "
                             "libludo", m->name ? m->name : "?");
    return LUDO_EINVAL;
  }
  if (m->name == NULL || m->funcs == NULL) {
    ludo__runtime_seterr(rt, "EINVAL: a host module needs a name and a "
                             "function list");
    return LUDO_EINVAL;
  }
  if (reserved(m->name)) {
    ludo__runtime_seterr(rt, "EINVAL: host module name '%.200s' is "
                             "reserved: \"ludo\" and \"ludo.*\" are ludo's "
                             "own modules", m->name);
    return LUDO_EINVAL;
  }
  if (ludo__registry_find(r, m->name) != NULL) {
    ludo__runtime_seterr(rt, "EINVAL: host module '%.200s' is already "
                             "registered with this %s", m->name, where);
    return LUDO_EINVAL;
  }
  return 0;
}

int ludo__runtime_add_module(ludo_runtime_t *rt,
                             const ludo_host_module_t *m) {
  ludo__registry_t *r = &rt->core.cmods;
  hostmod_t *h;
  int rc = ludo__hostmod_check(rt, r, m, "runtime");
  if (rc != 0) return rc;
  h = ludo__calloc(&rt->core.heap, sizeof *h);
  if (h == NULL) {
    ludo__runtime_seterr(rt, "ENOMEM: no memory for host module '%.200s'",
                         m->name);
    return LUDO_ENOMEM;
  }
  h->m = *m;
  rc = ludo__registry_add(r, m->name, ludo__env_host_module_open, &h->m);
  if (rc != 0) {
    ludo__free(&rt->core.heap, h, sizeof *h);
    if (rc == LUDO_EINVAL)
      ludo__runtime_seterr(rt, "EINVAL: host module name '%.200s': use "
                               "letters, digits and _ . - (not \"..\", not "
                               "starting with '.')", m->name);
    else
      ludo__runtime_seterr(rt, "%s: cannot register host module '%.200s'",
                           ludo__err_name(rc), m->name);
    return rc;
  }
  h->m.name = ludo__registry_find(r, m->name)->name; /* the owned copy */
  h->next = rt->hostmods;
  rt->hostmods = h;
  return 0;
}

/* Frees the copies (runtime shutdown: no state can require them now). */
void ludo__runtime_free_hostmods(ludo_runtime_t *rt) {
  while (rt->hostmods != NULL) {
    hostmod_t *h = rt->hostmods;
    rt->hostmods = h->next;
    ludo__free(&rt->core.heap, h, sizeof *h);
  }
}
