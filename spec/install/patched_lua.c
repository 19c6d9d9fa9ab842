/* patched_lua.c - what a program linked against the installed libludo.so
 * runs (scripts/test-install.sh): ludo's patched Lua, not the system's.
 *
 *   patched_lua FIXTURE ours     a loop of table.insert over a length
 *                                that __len makes up ends at the CPU
 *                                budget (ETIMEOUT; the system's Lua has
 *                                no check in that loop and spins), after
 *                                host functions were registered (the
 *                                program's lua.h calls are ludo's Lua)
 *   patched_lua FIXTURE foreign  linked with the system's liblua5.4 ahead
 *                                of libludo: registering host functions is
 *                                refused with EINVAL and says why
 *
 * FIXTURE is spec/fixtures/c/abuse. Prints one line; exit 0 on the
 * expected outcome. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>
#include <lua.h>
#include <ludo.h>

static int twice(void *p) {
  lua_State *L = p;
  lua_pushinteger(L, 2 * luaL_checkinteger(L, 1));
  return 1;
}

static const ludo_host_func_t funcs[] = {{"twice", twice}, {NULL, NULL}};

static int fail(const char *what, int rc, const char *msg) {
  printf("patched_lua: %s: %s: %s\n", what, ludo_err_name(rc), msg);
  return 1;
}

int main(int argc, char **argv) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_env_t *env;
  ludo_session_t *s;
  ludo_host_module_t m = {"twice", funcs, NULL};
  static const char loop[] = "{\"mode\":\"insert_virtual\"}";
  const char *out;
  size_t len;
  int rc;
  time_t t0;
  if (argc != 3) return fail("usage", LUDO_EINVAL, "FIXTURE ours|foreign");
  ludo_options_init(&o);
  o.cpu_budget_ms = 200;
  if ((rc = ludo_runtime_new(&rt, &o)) != 0)
    return fail("runtime", rc, "");
  rc = ludo_runtime_add_module(rt, &m);
  if (strcmp(argv[2], "foreign") == 0) {
    if (rc != LUDO_EINVAL ||
        strstr(ludo_runtime_errmsg(rt), "another Lua") == NULL)
      return fail("foreign Lua not refused", rc, ludo_runtime_errmsg(rt));
    printf("patched_lua: refused: %s\n", ludo_runtime_errmsg(rt));
    ludo_runtime_free(rt);
    return 0;
  }
  if (rc != 0) return fail("add_module", rc, ludo_runtime_errmsg(rt));
  if ((rc = ludo_env_load(rt, argv[1], NULL, &env)) != 0)
    return fail("env", rc, ludo_runtime_errmsg(rt));
  if ((rc = ludo_session_open(env, &s)) != 0)
    return fail("open", rc, ludo_runtime_errmsg(rt));
  if ((rc = ludo_session_reset(s, NULL, 0, &out, &len)) != 0)
    return fail("reset", rc, ludo_session_errmsg(s));
  t0 = time(NULL);
  rc = ludo_session_step(s, loop, sizeof loop - 1, &out, &len);
  if (rc != LUDO_ETIMEOUT || time(NULL) - t0 > 5)
    return fail("the table loop", rc, ludo_session_errmsg(s));
  ludo_session_close(s);
  ludo_runtime_free(rt);
  printf("patched_lua: the table loop ended at its budget\n");
  return 0;
}
