/* test-shared.c - shared prototypes (scripts/patches/lua-5.4.4-shared-
 * protos.patch, runtime/core/codecache.c): states that clone an owner's
 * prototypes see one string per name whether it came from shared code or
 * was made at run time (table keys, long strings, reserved words); a state
 * opened before a function was shared never uses it; collections in the
 * owner and in sharing states leave shared objects alone (ASan sees every
 * byte); through ludo, a module required late works in sessions opened
 * before and after it was shared, and sharing makes sessions smaller. */
#include "helpers.h"

#include <lauxlib.h>
#include <lualib.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "core/luashare.h"

/* Compiles src in the owner and shares it; returns the handle. */
static const void *share(lua_State *owner, const char *src,
                         unsigned int *gen) {
  const void *h;
  ASSERT_EQ(luaL_loadstring(owner, src), LUA_OK);
  h = lua_sharefunction(owner, -1, gen);
  ASSERT_NOT_NULL(h);
  lua_pop(owner, 1);
  return h;
}

static lua_State *sharing_state(lua_State *owner) {
  lua_State *L = lua_newstateshared(ludo__alloc_default, NULL, owner);
  ASSERT_NOT_NULL(L);
  luaL_openlibs(L);
  return L;
}

/* Runs `check` (a chunk taking the module) in L against a clone of h. */
static void run_check(lua_State *L, const void *h, const char *check) {
  lua_clonefunction(L, h);
  ASSERT_EQ(lua_pcall(L, 0, 1, 0), LUA_OK);
  ASSERT_EQ(luaL_loadstring(L, check), LUA_OK);
  lua_insert(L, -2);
  if (lua_pcall(L, 1, 0, 0) != LUA_OK)
    test__fail(__FILE__, __LINE__, "check failed: %s", lua_tostring(L, -1));
}

static const char module_src[] =
    "local M = { keys = { alpha = 1, beta_key = 2 } }\n"
    "M.long = 'a long constant of more than forty bytes, used as a key'\n"
    "M.words = { 'end', 'function', 'local', 'and', 'while' }\n"
    "function M.get(t, k) return t[k] end\n"
    "function M.byconst(t) return t.alpha, t.beta_key end\n"
    "function M.counter() local n = 0; return function() n = n + 1;"
    " return n end end\n"
    "return M\n";

/* Made at run time, each string must be the shared one (short) or equal
 * to it (long); keywords stay keywords; closures of shared prototypes
 * survive many collections of the sharing state. */
static const char identity_check[] =
    "local M = ...\n"
    "assert(M.keys[('alp') .. 'ha'] == 1, 'short key made at run time')\n"
    "local t = { [('beta_') .. 'key'] = 7, [('al') .. 'pha'] = 3 }\n"
    "local a, b = M.byconst(t)\n"
    "assert(a == 3 and b == 7, 'constant keys on run-time keys')\n"
    "assert(M.get(t, 'beta_key') == 7)\n"
    "local lk = 'a long constant of more than forty bytes, ' .. 'used as a key'\n"
    "local lt = { [M.long] = 5 }\n"
    "assert(lt[lk] == 5, 'long key made at run time')\n"
    "local f = assert(load('local x = 1 while x < 3 do x = x + 1 end '"
    "  .. 'if x == 3 and true then return \"end\" end'))\n"
    "assert(f() == 'end', 'keywords after shared strings')\n"
    "local weak = setmetatable({}, { __mode = 'k' })\n"
    "for i = 1, 3000 do\n"
    "  local c = M.counter(); c(); weak[c] = M.words[i % 5 + 1]\n"
    "  local s = M.words[i % 5 + 1] .. i\n"
    "  if i % 500 == 0 then collectgarbage() end\n"
    "end\n"
    "collectgarbage(); collectgarbage()\n"
    "assert(next(weak) == nil, 'closures collected')\n"
    "local c = M.counter(); c(); assert(c() == 2)\n";

TEST_IMPL(shared_strings_identity) {
  lua_State *owner, *a, *b;
  const void *h;
  unsigned int gen = 0;
  if (lua_newstateshared == NULL) return; /* not the patched Lua */
  owner = luaL_newstate();
  luaL_openlibs(owner);
  h = share(owner, module_src, &gen);
  ASSERT_UINT_GT(gen, 0);
  a = sharing_state(owner);
  b = sharing_state(owner);
  ASSERT_GE(lua_sharedgen(a, owner), gen);
  ASSERT_EQ(lua_sharedgen(owner, a), 0);
  run_check(a, h, identity_check);
  /* The owner collects and compiles on: its shared objects stay. */
  lua_gc(owner, LUA_GCCOLLECT);
  ASSERT_EQ(luaL_dostring(owner, "local t = {alpha = 1} collectgarbage() "
                                 "return t[('alp')..'ha']"), LUA_OK);
  ASSERT_EQ(lua_tointeger(owner, -1), 1);
  lua_pop(owner, 1);
  run_check(b, h, identity_check);
  lua_close(a); /* in any order, before the owner */
  run_check(b, h, identity_check);
  lua_close(b);
  lua_close(owner);
}

/* A state opened before a function was shared sees neither it nor its
 * strings: its own "late_name" stays the one it finds; a state opened
 * after sees both. Sharing what is shared already changes nothing. */
TEST_IMPL(shared_generation) {
  lua_State *owner, *early, *late;
  const void *h1, *h2;
  unsigned int gen1 = 0, gen2 = 0, again = 0;
  if (lua_newstateshared == NULL) return;
  owner = luaL_newstate();
  luaL_openlibs(owner);
  h1 = share(owner, module_src, &gen1);
  early = sharing_state(owner);
  ASSERT_EQ(luaL_dostring(early, "T = { [('late_') .. 'name'] = 9 }"),
            LUA_OK);
  h2 = share(owner, "return function(t) return t.late_name end", &gen2);
  ASSERT_UINT_GT(gen2, gen1);
  ASSERT_LT(lua_sharedgen(early, owner), gen2);
  ASSERT_GE(lua_sharedgen(early, owner), gen1);
  /* early's own string is the one it gets back. */
  ASSERT_EQ(luaL_dostring(early, "return T.late_name"), LUA_OK);
  ASSERT_EQ(lua_tointeger(early, -1), 9);
  lua_pop(early, 1);
  run_check(early, h1, identity_check);

  late = sharing_state(owner);
  ASSERT_GE(lua_sharedgen(late, owner), gen2);
  /* A clone is the owner's to share, not the sharing state's. */
  lua_clonefunction(late, h2);
  ASSERT_NULL(lua_sharefunction(late, -1, &again));
  lua_pop(late, 1);
  lua_clonefunction(late, h2);
  ASSERT_EQ(lua_pcall(late, 0, 1, 0), LUA_OK);
  ASSERT_EQ(luaL_dostring(late, "return { [('late_') .. 'name'] = 11 }"),
            LUA_OK);
  ASSERT_EQ(lua_pcall(late, 1, 1, 0), LUA_OK);
  ASSERT_EQ(lua_tointeger(late, -1), 11);
  lua_pop(late, 1);

  ASSERT_EQ(luaL_loadstring(owner, "return 1"), LUA_OK);
  lua_pushvalue(owner, -1);
  ASSERT_NOT_NULL(lua_sharefunction(owner, -1, &again));
  ASSERT_NOT_NULL(lua_sharefunction(owner, -2, &gen1));
  ASSERT_EQ(gen1, again);
  lua_pop(owner, 2);
  lua_pushinteger(owner, 1);
  ASSERT_EQ(lua_sharefunction(owner, -1, &again), NULL);
  lua_pop(owner, 1);
  lua_close(early);
  lua_close(late);
  lua_close(owner);
}

/* Through ludo: a module required after some sessions opened (they load
 * their own copy) and before others (they clone it) reads a key those
 * sessions made at run time. */
TEST_IMPL(shared_env_late_module) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_env_t *env;
  ludo_session_t *early[3], *late[3];
  const char *out;
  size_t len;
  int i;
  test_options(&o);
  o.prewarm = 0;
  rt = test_rt_new(&o);
  env = test_env_load(rt, "spec/fixtures/c/shared_late", NULL);
  for (i = 0; i < 3; i++) {
    early[i] = test_open(env);
    ASSERT_OK(ludo_session_reset(early[i], NULL, 0, &out, &len));
  }
  for (i = 0; i < 3; i++) {
    ASSERT_OK(ludo_session_step(early[i], J("{\"load\":true}"), &out, &len));
    ASSERT_EQ(JINT(JPARSE(out, len), "observation/value"), 42);
  }
  for (i = 0; i < 3; i++) {
    late[i] = test_open(env);
    ASSERT_OK(ludo_session_reset(late[i], NULL, 0, &out, &len));
    ASSERT_OK(ludo_session_step(late[i], J("{\"load\":true}"), &out, &len));
    ASSERT_EQ(JINT(JPARSE(out, len), "observation/value"), 42);
  }
  for (i = 0; i < 3; i++) {
    ludo_session_close(early[i]);
    ASSERT_OK(ludo_session_step(late[i], J("{\"load\":true}"), &out, &len));
    ASSERT_EQ(JINT(JPARSE(out, len), "observation/value"), 42);
    ludo_session_close(late[i]);
  }
  ASSERT_OK(ludo_env_free(env));
  test_rt_free(rt);
}

/* Lua bytes of an idle echo session, sharing or not (LUDO_SHARE_CODE). */
static size_t echo_session_bytes(const char *share) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_env_t *env;
  ludo_session_t *s;
  const char *out;
  size_t len, bytes;
  setenv("LUDO_SHARE_CODE", share, 1);
  test_options(&o);
  o.prewarm = 0;
  rt = test_rt_new(&o);
  env = test_env_load(rt, "examples/echo", NULL);
  ludo_session_close(test_open(env)); /* compiles every module */
  s = test_open(env);
  ASSERT_OK(ludo_session_reset(s, NULL, 0, &out, &len));
  ASSERT_OK(ludo_session_step(s, J("{\"message\":\"hi\"}"), &out, &len));
  ASSERT_EQ(JNUM(JPARSE(out, len), "reward"), 0.2 * 0.6 + 0.2 + 0.2);
  bytes = ludo_session_memory(s);
  ludo_session_close(s);
  ASSERT_OK(ludo_env_free(env));
  test_rt_free(rt);
  unsetenv("LUDO_SHARE_CODE");
  return bytes;
}

/* Sharing takes the code out of every session: an echo session holds
 * well under three quarters of the Lua memory it holds without. */
TEST_IMPL(shared_code_smaller_sessions) {
  size_t on, off;
  if (lua_newstateshared == NULL) return;
  off = echo_session_bytes("0");
  on = echo_session_bytes("1");
  fprintf(stderr, "echo session Lua bytes: %zu shared, %zu not\n", on, off);
  ASSERT_LT(on * 4, off * 3);
}

/* The probe state that read the environment compiled its modules after it
 * opened, so it holds its own copies: the environment builds a sharing
 * state in its place, and the first session is as small as the next. */
TEST_IMPL(shared_first_session) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_env_t *env;
  ludo_session_t *s;
  size_t first, second;
  if (lua_newstateshared == NULL) return;
  test_options(&o);
  o.prewarm = 0;
  rt = test_rt_new(&o);
  env = test_env_load(rt, "examples/echo", NULL);
  s = test_open(env);
  first = ludo_session_memory(s);
  ludo_session_close(s);
  s = test_open(env);
  second = ludo_session_memory(s);
  ludo_session_close(s);
  fprintf(stderr, "echo sessions' Lua bytes: first %zu, second %zu\n",
          first, second);
  ASSERT_LT(first * 10, second * 11);
  ASSERT_OK(ludo_env_free(env));
  test_rt_free(rt);
}

/* ---- review: failures and collector modes --------------------------- */

/* The helpers' counting allocator (test_alloc_fn, one test_alloc_t per
 * state): refuse_from(a, k) makes it refuse the k-th growing call from
 * now and every one after it; refuse_from(a, -1) refuses none. */
static void refuse_from(test_alloc_t *a, long k) {
  a->fail_sticky = 1;
  a->fail_at = k < 0 ? -1 : (long)a->grows + k;
}

/* In the owner, protected: shares the function at 1 into *(2) (gen *(3)). */
static int share_protected(lua_State *O) {
  const void **h = lua_touserdata(O, 2);
  *h = lua_sharefunction(O, 1, lua_touserdata(O, 3));
  return 0;
}

static int clone_protected(lua_State *L) {
  lua_clonefunction(L, lua_touserdata(L, 1));
  lua_call(L, 0, 1);
  return 1;
}

/* Shares src under a refusing allocator until it goes through: a failed
 * share raises a memory error and changes nothing. */
static const void *share_faulty(lua_State *owner, test_alloc_t *fo,
                                const char *src, unsigned int *gen) {
  const void *h = NULL;
  long k;
  for (k = 0;; k++) {
    int rc;
    ASSERT_EQ(luaL_loadstring(owner, src), LUA_OK);
    lua_pushcfunction(owner, share_protected);
    lua_insert(owner, -2);
    lua_pushlightuserdata(owner, &h);
    lua_pushlightuserdata(owner, gen);
    refuse_from(fo, k);
    rc = lua_pcall(owner, 3, 0, 0);
    refuse_from(fo, -1);
    if (rc == LUA_OK) return h;
    ASSERT_EQ(rc, LUA_ERRMEM);
    lua_pop(owner, 1);
  }
}

/* Opening a sharing state, cloning into it and sharing in the owner, each
 * failing at every allocation in turn: the states stay usable, short
 * strings stay one per name, and (under ASan) nothing leaks or is read
 * after it was freed. */
TEST_IMPL(shared_alloc_faults) {
  test_alloc_t fo = {0, 0, 0, 0, -1, 0, 0, 0}, fs = fo;
  lua_State *owner;
  int i;
  if (lua_newstateshared == NULL) return;
  owner = lua_newstate(test_alloc_fn, &fo);
  ASSERT_NOT_NULL(owner);
  luaL_openlibs(owner);
  for (i = 0; i < 40; i++) { /* enough to grow the owner's table */
    char src[256], check[512];
    unsigned int gen = 0;
    const void *h;
    lua_State *L = NULL;
    long k;
    snprintf(src, sizeof src,
             "local t = { 'fault_key_%d', 'alpha', 'end' }\n"
             "return function() return t[1], 'beta_%d', t end", i, i);
    h = share_faulty(owner, &fo, src, &gen);
    ASSERT_NOT_NULL(h);
    for (k = 0; L == NULL; k++) { /* NULL while the allocator refuses */
      refuse_from(&fs, k);
      L = lua_newstateshared(test_alloc_fn, &fs, owner);
      refuse_from(&fs, -1);
    }
    luaL_openlibs(L);
    ASSERT_GE(lua_sharedgen(L, owner), gen);
    for (k = 0;; k++) {
      int rc;
      lua_pushcfunction(L, clone_protected);
      lua_pushlightuserdata(L, (void *)h);
      refuse_from(&fs, k);
      rc = lua_pcall(L, 1, 1, 0);
      refuse_from(&fs, -1);
      if (rc == LUA_OK) break;
      ASSERT_EQ(rc, LUA_ERRMEM);
      lua_pop(L, 1);
    }
    lua_setglobal(L, "F");
    snprintf(check, sizeof check,
             "local a, b, t = F()\n"
             "local k = { [('fault_key_') .. %d] = 1, [('beta_') .. %d] = 2,"
             " [('al') .. 'pha'] = 3 }\n"
             "assert(k[a] == 1 and k[b] == 2 and k[t[2]] == 3)\n"
             "assert(load('if true then return 1 end'))\n"
             "collectgarbage()\n", i, i);
    if (luaL_dostring(L, check) != LUA_OK)
      test__fail(__FILE__, __LINE__, "check %d: %s", i, lua_tostring(L, -1));
    lua_close(L);
    ASSERT_UINT_EQ(fs.live, 0);
  }
  lua_close(owner);
  ASSERT_UINT_EQ(fo.live, 0);
  ASSERT_UINT_EQ(fo.osize_mismatch + fs.osize_mismatch, 0);
}

static const char gc_check[] =
    "local M = ...\n"
    "local wk = setmetatable({}, { __mode = 'k' })\n"
    "local wv = setmetatable({}, { __mode = 'v' })\n"
    "local eph = setmetatable({}, { __mode = 'k' })\n"
    "for i, w in ipairs(M.words) do wk[w] = i; wv[i] = w end\n"
    "wk[M.long] = 0; wv[0] = M.long\n"
    "for i = 1, 2000 do\n"
    "  local c = M.counter(); c()\n"
    "  eph[c] = { c, M.words[i % 5 + 1] }\n"
    "  local co = coroutine.wrap(function() local d = M.counter()\n"
    "    while true do coroutine.yield(d()) end end)\n"
    "  co(); co()\n"
    "  if i % 400 == 0 then collectgarbage() end\n"
    "end\n"
    "collectgarbage(); collectgarbage()\n"
    "assert(next(eph) == nil, 'ephemerons cleared')\n"
    "for i, w in ipairs(M.words) do\n"
    "  assert(wk[w] == i and wv[i] == w, 'strings are never weak')\n"
    "end\n"
    "assert(wk[M.long] == 0 and wv[0] == M.long)\n"
    "assert(M.keys[('alp') .. 'ha'] == 1)\n";

/* Shared objects are gray and old forever: a generational collector
 * (owner or sharing state) leaves them alone as the incremental one does,
 * weak tables never clear shared strings, and ephemerons keyed by closures
 * of shared prototypes clear. */
TEST_IMPL(shared_gc_modes) {
  lua_State *owner, *a, *b;
  const void *h;
  unsigned int gen = 0;
  if (lua_newstateshared == NULL) return;
  owner = luaL_newstate();
  luaL_openlibs(owner);
  lua_gc(owner, LUA_GCGEN, 0, 0); /* sharing goes back to incremental */
  h = share(owner, module_src, &gen);
  a = sharing_state(owner);
  b = sharing_state(owner);
  lua_gc(a, LUA_GCGEN, 0, 0);
  run_check(a, h, gc_check);
  run_check(b, h, gc_check);
  lua_gc(owner, LUA_GCGEN, 0, 0);
  ASSERT_EQ(luaL_dostring(owner, "local t = {} for i = 1, 5000 do "
                                 "t[i] = { 'alpha', ('beta_') .. 'key' } "
                                 "end collectgarbage() return #t"), LUA_OK);
  lua_pop(owner, 1);
  lua_gc(owner, LUA_GCCOLLECT);
  run_check(a, h, gc_check);
  lua_gc(a, LUA_GCINC, 0, 0, 0);
  lua_gc(b, LUA_GCGEN, 0, 0);
  run_check(a, h, identity_check);
  run_check(b, h, identity_check);
  lua_close(a);
  lua_close(b);
  lua_close(owner);
}
