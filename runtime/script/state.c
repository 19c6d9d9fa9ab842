/* state.c - sandboxed Lua states (see state.h and docs/sandbox.md).
 *
 * The recipe: lua_newstate with a counting allocator that refuses growth
 * past the cap; a permanent count hook (inherited by every coroutine) that
 * checks the call's CPU budget and, once exceeded, re-arms itself to fire on
 * every instruction so no pcall can swallow the timeout; only base, table,
 * string, math, utf8 and coroutine; no dofile/loadfile/string.dump; load
 * restricted to text chunks; print routed to the log; setmetatable refusing
 * __gc (finalizers run with hooks off, so they could spin forever);
 * collectgarbage limited to harmless options; the string metatable hidden. */
#include "script/state.h"

#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/redact.h"
#include "base/utf8.h"
#include "core/error.h"
#include "core/luashare.h"
#include "script/guards.h"
#include "script/pattern.h"
#include "script/traceback.h"
#include "ludo_defs.h"
#include "script/modules.h"

/* Every case of ludo__state_alloc; its fast paths below take the common
 * ones. Not inlined there: the fast paths then save no registers. */
static __attribute__((noinline)) void *alloc_any(ludo__state_t *st,
                                                 void *ptr, size_t osize,
                                                 size_t nsize) {
  void *p;
  if (ptr == NULL) osize = 0;
  if (nsize == 0) {
    if (ptr != NULL) {
      ludo__arena_realloc(&st->arena, ptr, osize, 0);
      st->used -= osize;
      if (st->total) *st->total -= osize;
    }
    return NULL;
  }
  if (nsize > osize) {
    /* Growth-only refusal: shrinking and freeing always succeed. */
    if (st->cap != 0 && st->used + (nsize - osize) > st->cap) {
      /* Where the Lua was: the error may be caught and raised again
       * elsewhere (a pcall), and its place is this one. Reading the
       * stack allocates nothing. */
      if (st->refused++ == 0 && st->armed && st->depth > 0 &&
          st->depth <= LUDO__CHAIN_MAX)
        ludo__state_locate(st, st->chain[st->depth - 1]);
      if (st->refused == LUDO__REFUSALS_MAX)
        ludo__state_kill(st, LUDO__KILL_MEMORY); /* raised by the hook */
      goto failed;
    }
    if (st->fail_after >= 0 && st->fail_after-- == 0) goto failed;
  }
  p = ludo__arena_realloc(&st->arena, ptr, osize, nsize);
  if (p == NULL) {
    if (nsize > osize) goto failed;
    return NULL;
  }
  st->used = st->used - osize + nsize;
  if (st->total) *st->total = *st->total - osize + nsize;
  return p;
failed:
  st->failed++;
  return NULL;
}

/* Most calls free a small block (or nothing) or ask for a fresh small
 * one (a step's tables, their parts, strings): those are done here without
 * a call, with the same effect alloc_any would have, and everything else
 * goes there (a tail call, so this path saves no registers). A fresh block
 * is only taken here when neither the cap nor fault injection could refuse
 * it: cap - 1 is SIZE_MAX when there is no cap (0), so one comparison
 * stands for "cap != 0 && used + nsize > cap" (1 <= nsize <= 256: no
 * overflow). */
void *ludo__state_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  ludo__state_t *st = ud;
  void *p;
  if (nsize == 0) {
    if (ptr == NULL) return NULL; /* Lua frees absent parts (an empty
                                     table's array) this way */
    if (ludo__arena_give(&st->arena, ptr, osize)) {
      st->used -= osize;
      if (st->total) *st->total -= osize;
      return NULL;
    }
  }
  if (ptr == NULL && nsize - 1 < LUDO__ARENA_MAX &&
      (st->used + nsize - 1 <= st->cap - 1) & (st->fail_after < 0) &&
      (p = ludo__arena_take(&st->arena, nsize)) != NULL) {
    st->used += nsize;
    if (st->total) *st->total += nsize;
    return p;
  }
  return alloc_any(st, ptr, osize, nsize);
}

ludo__state_t *ludo__state_of(lua_State *L) {
  /* A state is ours when it allocates through ludo__state_alloc; its ud is then
   * the ludo__state_t. Works from any thread of the state and returns NULL
   * for foreign states (e.g. a stock lua5.4 loading ludo's C modules). */
  void *ud;
  return lua_getallocf(L, &ud) == ludo__state_alloc ? ud : NULL;
}

static void budget_hook(lua_State *L, lua_Debug *ar);

/* The hook a thread carries when nothing is wrong: none with a watchdog,
 * the budget count hook without one. */
static void normal_hook(ludo__state_t *st, lua_State *L) {
  if (st->count_hook)
    lua_sethook(L, budget_hook, LUA_MASKCOUNT, LUDO__HOOK_COUNT);
  else
    lua_sethook(L, NULL, 0, 0);
}

/* Yields the call thread at the end of its time slice, when it can: only
 * from the call thread itself (a nested coroutine would hand the yield to
 * its resumer) and only where Lua may yield. Otherwise the hook tries
 * again a little later. */
static void try_yield(lua_State *L, ludo__state_t *st) {
  int i, n;
  if (st->depth != 1 || st->chain[0] != L || !lua_isyieldable(L)) {
    if (!st->count_hook) lua_sethook(L, budget_hook, LUA_MASKCOUNT, 100);
    return;
  }
  st->yield_wanted = 0;
  st->sliced = 1;
  n = st->depth < LUDO__CHAIN_MAX ? st->depth : LUDO__CHAIN_MAX;
  for (i = 0; i < n; i++) normal_hook(st, st->chain[i]);
  lua_yield(L, 0);
}

/* The message of a call stopped for `killed` (not a memory error). */
static void push_killed(lua_State *L, ludo__state_t *st) {
  if (st->killed == LUDO__KILL_CLOSED) {
    if (st->owner_is_session)
      lua_pushliteral(L, "ECANCELED: the session was closed");
    else
      lua_pushliteral(L, "ECANCELED: the script was freed");
  } else if (st->killed == LUDO__KILL_INTERRUPTED) {
    lua_pushliteral(L, "ECANCELED: the call was interrupted by the host");
  } else if (st->killed == LUDO__KILL_WALL) {
    ludo__state_locate(st, L);
    lua_pushliteral(L, "ETIMEOUT: the call exceeded its wall-clock limit");
  } else if (st->killed == LUDO__KILL_OUTER) {
    ludo__state_locate(st, L);
    lua_pushliteral(L, "ETIMEOUT: the budget of the call it ran inside "
                       "ran out");
  } else {
    ludo__state_locate(st, L); /* the first time: where it ran */
    lua_pushliteral(L, "ETIMEOUT: the call exceeded its CPU budget");
  }
}

/* The runtime's interrupt generation (ludo_runtime_interrupt). */
static unsigned cancel_now(const ludo__state_t *st) {
  return st->core ? atomic_load(&st->core->watchdog.cancel_gen) : 0;
}

/* 1 when ludo_runtime_interrupt was called since this call was issued. */
static int cancel_asked(const ludo__state_t *st) {
  return cancel_now(st) != st->cancel_gen;
}

/* Sets st->killed when the running call is over its CPU budget or past
 * its wall-clock deadline. */
static void over_limits(ludo__state_t *st) {
  uint64_t now = ludo__clock_for(st->precise);
  if (st->budget_ns != 0 &&
      st->used_ns + (now - st->run_start_ns) > st->budget_ns)
    st->killed = LUDO__KILL_BUDGET;
  else if (st->wall_end_ns != 0 && now > st->wall_end_ns)
    st->killed = LUDO__KILL_WALL;
}

static void budget_hook(lua_State *L, lua_Debug *ar) {
  ludo__state_t *st = ludo__state_of(L);
  if (st == NULL || !st->armed) return;
  /* Before a call made from C, or where C work (calls of C functions,
   * string comparisons) was charged to the count hook (the patched Lua's
   * stop check): a stopped call's error and, with the permanent hook, the
   * counting; never a yield. */
  if (ar->currentline == LUDO__STOPCHECK_LINE && !st->killed &&
      !st->count_hook)
    return;
  if (!st->killed && st->count_hook) {
    st->instr += (uint64_t)lua_gethookcount(L); /* instructions and charges */
    if (st->max_instr != 0 && st->instr > st->max_instr)
      st->killed = LUDO__KILL_BUDGET;
    if (!st->killed) over_limits(st);
    if (st->wd.slice_ns != 0 && ludo__clock_ns() >= st->wd.slice_ns)
      st->yield_wanted = 1;
    if (!st->killed && cancel_asked(st)) st->killed = LUDO__KILL_INTERRUPTED;
  }
  if (st->killed) {
    /* From now on fire on every instruction of this thread: whatever
     * pcall or xpcall catches the error, the next instruction raises it
     * again. Set once: lua_sethook walks the whole chain of calls, and a
     * stopped call deep in pcalls comes here once per level. */
    if (lua_gethookcount(L) != 1 || lua_gethook(L) != budget_hook)
      lua_sethook(L, budget_hook, LUA_MASKCOUNT, 1);
    if (st->killed == LUDO__KILL_MEMORY)
      lua_pushliteral(L, "not enough memory"); /* ENOMEM: state_error */
    else
      push_killed(L, st);
    lua_error(L);
  }
  if (st->yield_wanted && ar->currentline != LUDO__STOPCHECK_LINE)
    try_yield(L, st);
}

static int state_panic(lua_State *L) {
  ludo__state_t *st = ludo__state_of(L);
  const char *msg = lua_tostring(L, -1);
  ludo__log(st ? st->log : NULL, LUDO_LOG_ERROR, "ludo",
            "unprotected Lua error: %s", msg ? msg : "(not a string)");
  return 0; /* Lua aborts */
}

/* print(...): joins tostring() of the arguments with tabs and sends the
 * line to the log at INFO level, named after the session. */
static int l_print(lua_State *L) {
  ludo__state_t *st = ludo__state_of(L);
  int n = lua_gettop(L), i;
  luaL_Buffer b;
  size_t len;
  const char *s;
  luaL_buffinit(L, &b);
  for (i = 1; i <= n; i++) {
    s = luaL_tolstring(L, i, &len); /* may raise */
    if (i > 1) luaL_addchar(&b, '\t');
    luaL_addvalue(&b);
    (void)s;
  }
  luaL_pushresult(&b);
  s = lua_tolstring(L, -1, &len);
  ludo__state_log(L, st, LUDO_LOG_INFO, s, len);
  return 0;
}

void ludo__state_log(lua_State *L, ludo__state_t *st, int level,
                     const char *msg, size_t len) {
  static const char hex[] = "0123456789abcdef";
  const char *who = st && st->who ? st->who : "lua";
  luaL_Buffer b;
  size_t i;
  if (st != NULL) {
    if (st->log_bytes >= LUDO__LOG_CALL_MAX) return;
    st->log_bytes += len;
    if (st->log_bytes >= LUDO__LOG_CALL_MAX) {
      ludo__log(st->log, LUDO_LOG_WARN, who, "log output of this call cut "
                "at %zu bytes", (size_t)LUDO__LOG_CALL_MAX);
      return;
    }
  }
  luaL_buffinit(L, &b);
  for (i = 0; i < len; i++) {
    unsigned char c = (unsigned char)msg[i];
    if (c >= 0x20 && c != 0x7f) {
      luaL_addchar(&b, (char)c);
    } else if (c == '\t') {
      luaL_addchar(&b, '\t');
    } else { /* newlines and escapes: visible, never raw */
      luaL_addchar(&b, '\\');
      luaL_addchar(&b, c == '\n' ? 'n' : c == '\r' ? 'r' : 'x');
      if (c != '\n' && c != '\r') {
        luaL_addchar(&b, hex[c >> 4]);
        luaL_addchar(&b, hex[c & 15]);
      }
    }
  }
  luaL_pushresult(&b);
  msg = lua_tolstring(L, -1, &len);
  ludo__log_write(st ? st->log : NULL, (ludo_log_level_t)level, who, msg,
                  len);
  lua_pop(L, 1);
}

/* The parser's input, fed in slices of this many bytes: the parser is C
 * (no hook runs inside it) and some inputs cost it more than linear time
 * (a chain of `and`s is quadratic), so the call's budget is looked at
 * between slices. */
#define LOAD_SLICE 512

typedef struct {
  const char *s;  /* the text not yet given to the parser */
  size_t left;
  int fn;         /* the chunk is a function giving the text in pieces */
} load_reader_t;

/* lua_Reader of l_load. The pieces of a function chunk are kept in the
 * stack's slot 5, as the stock load keeps them. */
static const char *load_reader(lua_State *L, void *ud, size_t *size) {
  load_reader_t *r = ud;
  size_t n;
  if (ludo__state_check(L)) lua_error(L); /* load returns it; the call
                                             ends at its next instruction */
  if (r->left == 0 && r->fn) {
    luaL_checkstack(L, 2, "too many nested functions");
    lua_pushvalue(L, 1);
    lua_call(L, 0, 1);
    if (lua_isnil(L, -1)) {
      lua_pop(L, 1);
      r->fn = 0;
    } else if (!lua_isstring(L, -1)) {
      luaL_error(L, "reader function must return a string");
    } else {
      lua_replace(L, 5);
      r->s = lua_tolstring(L, 5, &r->left);
    }
  }
  n = r->left < LOAD_SLICE ? r->left : LOAD_SLICE;
  *size = n;
  r->left -= n;
  r->s += n;
  return n > 0 ? r->s - n : NULL;
}

/* load(chunk [, chunkname [, mode [, env]]]): text chunks only, parsed
 * within the call's budget. */
static int l_load(lua_State *L) {
  size_t len;
  const char *s = lua_tolstring(L, 1, &len);
  const char *mode = luaL_optstring(L, 3, "t");
  const char *name;
  int env = !lua_isnone(L, 4) ? 4 : 0, status;
  load_reader_t r;
  if (strchr(mode, 't') == NULL) {
    luaL_pushfail(L);
    lua_pushliteral(L, "EPERM: binary chunks are not allowed in the sandbox");
    return 2;
  }
  r.s = s;
  r.left = s != NULL ? len : 0;
  r.fn = s == NULL;
  if (s != NULL) {
    name = luaL_optstring(L, 2, s);
  } else {
    name = luaL_optstring(L, 2, "=(load)");
    luaL_checktype(L, 1, LUA_TFUNCTION);
    lua_settop(L, 5); /* slot 5 keeps the reader's current piece */
  }
  status = lua_load(L, load_reader, &r, name, "t");
  if (status != LUA_OK) {
    luaL_pushfail(L);
    lua_insert(L, -2);
    return 2;
  }
  if (env != 0) { /* the chunk's first upvalue is its _ENV */
    lua_pushvalue(L, env);
    if (!lua_setupvalue(L, -2, 1)) lua_pop(L, 1);
  }
  return 1;
}

/* setmetatable(t, mt): the base library's, refusing metatables with
 * __gc. Done here rather than by wrapping the original: a nested call
 * cost as much as the rest, and the library's own classes and contexts
 * set a metatable per object. Same checks and messages. */
static int l_setmetatable(lua_State *L) {
  int t = lua_type(L, 2);
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_argexpected(L, t == LUA_TNIL || t == LUA_TTABLE, 2, "nil or table");
  if (t == LUA_TTABLE) {
    lua_pushliteral(L, "__gc");
    if (lua_rawget(L, 2) != LUA_TNIL)
      return luaL_error(L, "EPERM: __gc metamethods are not allowed in "
                           "the sandbox");
    lua_pop(L, 1);
  }
  if (luaL_getmetafield(L, 1, "__metatable") != LUA_TNIL)
    return luaL_error(L, "cannot change a protected metatable");
  lua_settop(L, 2);
  lua_setmetatable(L, 1);
  return 1;
}

/* collectgarbage(opt): only options that cannot hurt the host. */
static int l_collectgarbage(lua_State *L) {
  static const char *const allowed[] = {"collect", "count", "step",
                                        "isrunning", NULL};
  int n = lua_gettop(L);
  luaL_checkoption(L, 1, "collect", allowed);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, n, LUA_MULTRET);
  return lua_gettop(L);
}

/* Keeps st->chain, the coroutines a call runs through, for the watchdog:
 * on a timeout every one of them gets the hook. */
static void chain_push(ludo__state_t *st, lua_State *co) {
  if (st->depth < LUDO__CHAIN_MAX) st->chain[st->depth] = co;
  st->depth++;
  if (st->killed || st->yield_wanted)
    lua_sethook(co, budget_hook, LUA_MASKCOUNT, 1);
}

static void chain_pop(ludo__state_t *st) {
  if (st->depth > 0) st->depth--;
}

/* Raises unless the chain has room for one more coroutine: the watchdog
 * reaches the first LUDO__CHAIN_MAX only, and a coroutine it cannot
 * reach would run past every limit. */
static void chain_room(lua_State *L, const ludo__state_t *st) {
  if (st != NULL && st->depth >= LUDO__CHAIN_MAX)
    luaL_error(L, "coroutines nest more than %d deep", LUDO__CHAIN_MAX);
}

/* coroutine.resume(co, ...): the library's, tracking the chain. */
static int l_co_resume(lua_State *L) {
  ludo__state_t *st = ludo__state_of(L);
  lua_State *co = lua_tothread(L, 1);
  int rc, n = lua_gettop(L);
  luaL_argexpected(L, co != NULL, 1, "coroutine");
  chain_room(L, st);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  chain_push(st, co);
  rc = lua_pcall(L, n, LUA_MULTRET, 0);
  chain_pop(st);
  if (rc != LUA_OK) return lua_error(L);
  return lua_gettop(L);
}

/* coroutine.close(co): the library's, with co in the chain while its
 * __close handlers run (so the budget reaches them) and a bound on
 * nesting (Lua 5.4.4 crashes on deep nesting inside __close handlers). */
static int l_co_close(lua_State *L) {
  ludo__state_t *st = ludo__state_of(L);
  lua_State *co = lua_tothread(L, 1);
  int rc, n = lua_gettop(L);
  luaL_argexpected(L, co != NULL, 1, "coroutine");
  if (st == NULL) return luaL_error(L, "no sandbox");
  if (st->close_depth >= LUDO__CLOSE_NEST_MAX)
    return luaL_error(L, "coroutine.close nested more than %d deep",
                      LUDO__CLOSE_NEST_MAX);
  chain_room(L, st);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  st->close_depth++;
  chain_push(st, co);
  rc = lua_pcall(L, n, LUA_MULTRET, 0);
  chain_pop(st);
  st->close_depth--;
  if (rc != LUA_OK) return lua_error(L);
  return lua_gettop(L);
}

/* The function coroutine.wrap returns: resumes its thread (upvalue 2)
 * through l_co_resume (upvalue 1) and raises its errors. */
static int co_wrapped(lua_State *L) {
  int n = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_pushvalue(L, lua_upvalueindex(2));
  lua_rotate(L, 1, 2);
  lua_call(L, n + 1, LUA_MULTRET);
  if (!lua_toboolean(L, 1)) {
    lua_State *co = lua_tothread(L, lua_upvalueindex(2));
    ludo__state_t *st = ludo__state_of(L);
    int memerr = lua_status(co) == LUA_ERRMEM;
    /* Close the dead coroutine's pending __close variables, as the
     * library's wrap does, unless the call was killed by its budget (they
     * would run with hooks off). */
    if (lua_status(co) != LUA_OK && lua_status(co) != LUA_YIELD &&
        !(st != NULL && st->killed)) {
      if (st != NULL) chain_push(st, co); /* the budget reaches it */
      lua_resetthread(co);
      if (st != NULL) chain_pop(st);
    }
    /* A memory error keeps its message as is (the library's wrap does
     * too): the session reports it as ENOMEM, not as a script's error. */
    if (!memerr && lua_type(L, 2) == LUA_TSTRING) {
      luaL_where(L, 1);
      lua_insert(L, 2);
      lua_concat(L, 2);
    }
    lua_settop(L, 2);
    return lua_error(L);
  }
  return lua_gettop(L) - 1;
}

/* coroutine.wrap(f) */
static int l_co_wrap(lua_State *L) {
  lua_State *co;
  luaL_checktype(L, 1, LUA_TFUNCTION);
  co = lua_newthread(L);
  lua_pushvalue(L, 1);
  lua_xmove(L, co, 1);
  lua_pushvalue(L, lua_upvalueindex(1)); /* our resume */
  lua_insert(L, -2);
  lua_pushcclosure(L, co_wrapped, 2);
  return 1;
}

/* The message handler xpcall really installs: skips the user's handler
 * once the call has timed out. Lua runs a handler before unwinding, and
 * when the error came from the budget hook, hooks are still disabled
 * there, so a looping handler could never be stopped. */
static int xpcall_guard(lua_State *L) {
  ludo__state_t *st = ludo__state_of(L);
  if (st != NULL && st->killed) return 1; /* the error object as is */
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 1);
  return 1;
}

static int xpcall_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  (void)ctx;
  return lua_gettop(L);
}

/* xpcall(f, handler, ...); yieldable like the original. */
static int l_xpcall(lua_State *L) {
  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_pushvalue(L, 2);
  lua_pushcclosure(L, xpcall_guard, 1);
  lua_replace(L, 2);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_callk(L, lua_gettop(L) - 1, LUA_MULTRET, 0, xpcall_k);
  return lua_gettop(L);
}

static void wrap_global(lua_State *L, const char *name, lua_CFunction fn) {
  lua_getglobal(L, name);
  lua_pushcclosure(L, fn, 1);
  lua_setglobal(L, name);
}

static const char nomem_key, timeout_key, cancel_key, closed_key;

/* Runs inside lua_pcall: opens and trims the libraries. [-0, +0, m] */
static int open_sandbox(lua_State *L) {
  ludo__state_t *st = ludo__state_of(L);
  static const luaL_Reg libs[] = {
      {LUA_GNAME, luaopen_base},         {LUA_TABLIBNAME, luaopen_table},
      {LUA_STRLIBNAME, luaopen_string},  {LUA_MATHLIBNAME, luaopen_math},
      {LUA_UTF8LIBNAME, luaopen_utf8},   {LUA_COLIBNAME, luaopen_coroutine},
      {NULL, NULL}};
  const luaL_Reg *lib;
  for (lib = libs; lib->func; lib++) {
    luaL_requiref(L, lib->name, lib->func, 1);
    lua_pop(L, 1);
  }
  lua_pushnil(L);
  lua_setglobal(L, "dofile");
  lua_pushnil(L);
  lua_setglobal(L, "loadfile");
  lua_pushcfunction(L, l_print);
  lua_setglobal(L, "print");
  lua_pushcfunction(L, l_load);
  lua_setglobal(L, "load");
  lua_register(L, "setmetatable", l_setmetatable); /* the base's, redone */
  wrap_global(L, "collectgarbage", l_collectgarbage);
  wrap_global(L, "xpcall", l_xpcall);
  ludo__guards_install(L);
  ludo__pattern_install(L);
  /* coroutine.resume and wrap track the running chain (see chain_push). */
  lua_getglobal(L, LUA_COLIBNAME);
  lua_getfield(L, -1, "resume");
  lua_pushcclosure(L, l_co_resume, 1);
  lua_pushvalue(L, -1);
  lua_setfield(L, -3, "resume");
  lua_pushcclosure(L, l_co_wrap, 1);
  lua_setfield(L, -2, "wrap");
  lua_getfield(L, -1, "close");
  lua_pushcclosure(L, l_co_close, 1);
  lua_setfield(L, -2, "close");
  lua_pop(L, 1);
  /* string.dump would hand out bytecode; the sandbox never loads it, but
   * there is no reason to offer it. */
  lua_getglobal(L, LUA_STRLIBNAME);
  lua_pushnil(L);
  lua_setfield(L, -2, "dump");
  lua_pop(L, 1);
  /* Hide the string metatable: getmetatable("") returns false. */
  lua_pushliteral(L, "");
  lua_getmetatable(L, -1);
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_pop(L, 2);
  if (st->modules != NULL) ludo__modules_install(L, st->modules);
  /* Messages for when there is no memory left to make one. */
  lua_pushliteral(L, "ENOMEM: out of memory (the session's memory limit "
                     "or the process's)");
  lua_rawsetp(L, LUA_REGISTRYINDEX, &nomem_key);
  lua_pushliteral(L, "ETIMEOUT: the call exceeded its CPU budget");
  lua_rawsetp(L, LUA_REGISTRYINDEX, &timeout_key);
  lua_pushliteral(L, "ECANCELED: the call was interrupted by the host");
  lua_rawsetp(L, LUA_REGISTRYINDEX, &cancel_key);
  lua_pushliteral(L, "ECANCELED: the session or script was closed");
  lua_rawsetp(L, LUA_REGISTRYINDEX, &closed_key);
  return 0;
}

int ludo__state_open(ludo__state_t *st) {
  lua_State *L;
  int rc;
  st->used = 0;
  st->fail_after = -1;
  st->armed = st->killed = 0;
  st->budget_ns = st->max_instr = st->used_ns = st->instr = 0;
  st->run_start_ns = 0;
  st->yield_wanted = st->sliced = st->running = st->close_depth = 0;
  memset(&st->wd, 0, sizeof st->wd);
  st->depth = 0;
  st->located = 0;
  st->sched = NULL;
  memset(&st->llm, 0, sizeof st->llm);
  if (st->core == NULL || !st->core->has_watchdog) st->count_hook = 1;
  ludo__arena_init(&st->arena, st->heap);
  if (st->core != NULL && st->heap == &st->core->heap &&
      st->heap->fn == ludo__alloc_default)
    st->arena.pages = &st->core->pages;
  L = ludo__codecache_newstate(st->modules ? st->modules->cache : NULL,
                               ludo__state_alloc, st);
  if (L == NULL) {
    ludo__arena_release(&st->arena);
    return LUDO_ENOMEM;
  }
  st->L = L;
  lua_atpanic(L, state_panic);
  /* A count hook is set before any thread exists, so every coroutine
   * inherits it (lua_newthread copies the creating thread's hook). With a
   * watchdog there is none until a call overruns. */
  if (st->count_hook)
    lua_sethook(L, budget_hook, LUA_MASKCOUNT, LUDO__HOOK_COUNT);
  /* States opened together and stepped together would collect together:
   * each gets its own pause, so their cycles drift apart; and the collector
   * works in steps of 2 KiB at twice the default speed, so a cycle of a
   * small session heap is spread over many calls instead of falling into a
   * few (measured in docs/performance.md: an async round's p99 from 4.5x
   * to 2.6x its median). */
  if (st->gc_pause > 0) lua_gc(L, LUA_GCINC, st->gc_pause, 200, 11);
  lua_pushcfunction(L, open_sandbox);
  rc = lua_pcall(L, 0, 0, 0);
  if (rc != LUA_OK) {
    ludo__log(st->log, LUDO_LOG_ERROR, "ludo", "opening a Lua state: %s",
              lua_tostring(L, -1) ? lua_tostring(L, -1) : "?");
    lua_close(L);
    st->L = NULL;
    ludo__arena_release(&st->arena);
    return rc == LUA_ERRMEM ? LUDO_ENOMEM : LUDO_ESCRIPT;
  }
  return 0;
}

void ludo__state_close(ludo__state_t *st) {
  if (st->L == NULL) return;
  /* The cap stays: only C finalizers run here (scripts cannot set __gc),
   * and Lua closes a state even when they find no memory. */
  st->fail_after = -1;
  lua_close(st->L);
  st->L = NULL;
  ludo__arena_release(&st->arena);
}

void ludo__state_arm(ludo__state_t *st, uint64_t budget_ns,
                     uint64_t max_instr) {
  st->cancel_gen = st->issued ? st->issued_gen : cancel_now(st);
  st->issued = 0;
  st->armed = 1;
  st->refused = 0;
  st->failed = 0;
  st->located = 0;
  st->log_bytes = 0;
  st->killed = 0;
  st->budget_ns = budget_ns;
  st->max_instr = max_instr;
  st->used_ns = 0;
  st->instr = 0;
  st->wall_end_ns = 0; /* the scheduler sets the call's, when it has one */
}

void ludo__state_issue(ludo__state_t *st) {
  st->issued_gen = cancel_now(st);
  st->issued = 1;
}

/* Called by the watchdog's signal handler (or directly): arms the hook on
 * every coroutine of the running call. Async-signal-safe. */
static void interrupt(void *arg, int why) {
  ludo__state_t *st = arg;
  int i, n;
  if (!st->armed || !st->running) return;
  if (why == LUDO__WD_CANCEL) {
    if (st->killed || !cancel_asked(st)) return;
    st->killed = LUDO__KILL_INTERRUPTED;
  } else if (why == LUDO__WD_KILL || why == LUDO__WD_KILL_OUTER) {
    if (st->killed) return;
    st->killed = why == LUDO__WD_KILL_OUTER ? LUDO__KILL_OUTER
                 : st->wall_first           ? LUDO__KILL_WALL
                                            : LUDO__KILL_BUDGET;
  } else {
    if (st->yield_wanted || st->killed) return;
    st->yield_wanted = 1;
  }
  n = st->depth < LUDO__CHAIN_MAX ? st->depth : LUDO__CHAIN_MAX;
  for (i = 0; i < n; i++)
    lua_sethook(st->chain[i], budget_hook, LUA_MASKCOUNT, 1);
}

int ludo__state_run_begin(ludo__state_t *st, lua_State *co,
                          uint64_t slice_ns) {
  /* The coarse clock is enough for long budgets; short ones, and
   * slices, are measured on the precise one (base/clock.h). */
  uint64_t left = st->budget_ns > st->used_ns ? st->budget_ns - st->used_ns
                                              : 0;
  uint64_t now;
  st->precise = (st->budget_ns != 0 && left < LUDO__CLOCK_COARSE_FROM_NS) ||
                (st->wall_end_ns != 0 && ludo__clock_precise_for(st->wall_ns));
  now = ludo__clock_for(st->precise);
  st->run_start_ns = now;
  st->depth = 0;
  st->sliced = 0;
  st->yield_wanted = 0;
  st->wd.slice_ns = slice_ns;
  st->wd.budget_ns = 0;
  if (st->budget_ns != 0) st->wd.budget_ns = now + left;
  st->wall_first = st->wall_end_ns != 0 &&
                   (st->wd.budget_ns == 0 || st->wall_end_ns < st->wd.budget_ns);
  if (st->wall_first) st->wd.budget_ns = st->wall_end_ns;
  if (!st->count_hook) {
    st->wd.interrupt = interrupt;
    st->wd.arg = st;
    if (ludo__watchdog_enter(&st->core->watchdog, &st->wd) != 0)
      return LUDO_EBUSY;
  } else if (slice_ns != 0 && ludo__clock_ns() >= slice_ns) {
    st->yield_wanted = 1;
  }
  st->running = 1;
  chain_push(st, co);
  /* Issued before a ludo_runtime_interrupt: stopped at its first
   * instruction (a queued call starting, a waiting one resuming). */
  if (cancel_asked(st)) ludo__state_kill(st, LUDO__KILL_INTERRUPTED);
  return 0;
}

void ludo__state_run_end(ludo__state_t *st) {
  if (!st->count_hook) ludo__watchdog_leave(&st->wd);
  st->running = 0;
  st->yield_wanted = 0;
  st->used_ns += ludo__clock_for(st->precise) - st->run_start_ns;
  st->depth = 0;
}

int ludo__state_over(lua_State *L) {
  ludo__state_t *st = ludo__state_of(L);
  if (st == NULL || !st->armed || !st->running) return 0;
  if (!st->killed) {
    over_limits(st);
    if (st->killed) { /* the hooks too, as ludo__state_kill sets them */
      int why = st->killed;
      st->killed = 0;
      ludo__state_kill(st, why);
    }
  }
  if (!st->killed && cancel_asked(st))
    ludo__state_kill(st, LUDO__KILL_INTERRUPTED);
  return st->killed != 0;
}

int ludo__state_stop(void *L) { return ludo__state_over(L); }

int ludo__state_stopped_ud(void *L) { return ludo__state_stopped(L); }

size_t ludo__state_cap(lua_State *L) {
  ludo__state_t *st = ludo__state_of(L);
  return st != NULL ? st->cap : 0;
}

int ludo__state_stopped(lua_State *L) {
  return ludo__state_is_stopped(ludo__state_of(L));
}

int ludo__state_check(lua_State *L) {
  ludo__state_t *st;
  if (!ludo__state_over(L)) return 0;
  st = ludo__state_of(L);
  if (st->killed == LUDO__KILL_MEMORY)
    lua_pushliteral(L, "not enough memory");
  else
    push_killed(L, st);
  return 1;
}

void ludo__state_kill(ludo__state_t *st, int why) {
  int i, n;
  if (!st->armed || st->killed) return;
  st->killed = why;
  n = st->depth < LUDO__CHAIN_MAX ? st->depth : LUDO__CHAIN_MAX;
  for (i = 0; i < n; i++)
    lua_sethook(st->chain[i], budget_hook, LUA_MASKCOUNT, 1);
}

void ludo__state_disarm(ludo__state_t *st, lua_State *co) {
  int killed = st->killed;
  st->armed = 0;
  st->killed = 0;
  st->yield_wanted = 0;
  /* A stopped call left hooks firing on every instruction; a sliced one
   * may have left a retry hook. */
  if (co != NULL) normal_hook(st, co);
  if (killed || !st->count_hook) normal_hook(st, st->L);
}

/* Errors that say "you used something wrong" keep a traceback: the place
 * that matters may be a few frames up. */
static int wants_traceback(int code) {
  return code == LUDO_ESCRIPT || code == LUDO_EINVAL;
}

/* Replaces each byte of the string on top that does not begin a valid
 * UTF-8 sequence with U+FFFD: an error message goes into JSON (a result,
 * an error frame, an evaluation record), and JSON text is UTF-8; a
 * script's error("\xff") must not make the host's writer fail.
 * [-1, +1, m] */
static void utf8_top(lua_State *L) {
  size_t len, i;
  const char *msg = lua_tolstring(L, -1, &len);
  luaL_Buffer b;
  if (msg == NULL || (i = ludo__utf8_check(msg, len)) == len) return;
  luaL_buffinit(L, &b);
  do {
    luaL_addlstring(&b, msg, i);
    luaL_addstring(&b, "\xEF\xBF\xBD");
    msg += i + 1;
    len -= i + 1;
    i = ludo__utf8_check(msg, len);
  } while (i < len);
  luaL_addlstring(&b, msg, len);
  luaL_pushresult(&b);
  lua_remove(L, -2);
}

static int state_error(ludo__state_t *st, lua_State *L, int status,
                       size_t cap);

static const char nomem_key = 'm';   /* registry: ENOMEM message */
static const char timeout_key = 't'; /* registry: ETIMEOUT message */
static const char cancel_key = 'c';  /* registry: ECANCELED messages */
static const char closed_key = 'C';

typedef struct {
  ludo__state_t *st;
  int status, code;
  size_t cap;
  lua_State *tb;
} err_req_t;

/* Writes "source:line" of frame `ar` at out + *len. */
static void put_frame(char *out, size_t n, size_t *len, const char *pre,
                      const lua_Debug *ar) {
  int k;
  if (*len >= n) return;
  k = snprintf(out + *len, n - *len, "%s%s:%d", pre, ar->short_src,
               ar->currentline);
  if (k > 0) *len = *len + (size_t)k < n ? *len + (size_t)k : n - 1;
}

void ludo__state_locate(ludo__state_t *st, lua_State *L) {
  lua_Debug ar;
  size_t len = 0;
  int level, found = 0;
  if (st->located) return;
  for (level = 0; lua_getstack(L, level, &ar); level++) {
    /* "S" and "l" read the function's own fields: no allocation. */
    if (!lua_getinfo(L, "Sl", &ar) || ar.currentline <= 0) continue;
    if (!found) {
      put_frame(st->where, sizeof st->where, &len, "", &ar);
      found = st->located = 1;
      if (ar.source[0] != '=') return; /* not the library's */
    } else if (ar.source[0] != '=') {
      put_frame(st->where, sizeof st->where, &len, ", from ", &ar);
      return;
    }
  }
}

/* Replaces the message on top with its text with heap addresses hidden,
 * when it has any (base/redact.h). [-1, +1, m] */
static void redact_top(lua_State *L) {
  size_t len;
  const char *msg = lua_tolstring(L, -1, &len);
  luaL_Buffer b;
  char *copy;
  if (msg == NULL || memmem(msg, len, ": 0x", 4) == NULL) return;
  copy = luaL_buffinitsize(L, &b, len);
  memcpy(copy, msg, len);
  luaL_pushresultsize(&b, ludo__redact_addresses(copy, len));
  lua_remove(L, -2);
}

typedef struct {
  ludo__state_t *st;
  const char *text;
} limit_req_t;

static int push_limit_p(lua_State *L) {
  limit_req_t *r = lua_touserdata(L, 1);
  if (r->st->located)
    lua_pushfstring(L, "%s (at %s)", r->text, r->st->where);
  else
    lua_pushstring(L, r->text);
  return 1;
}

void ludo__state_push_limit(ludo__state_t *st, lua_State *L,
                            const char *text) {
  lua_State *M = st->L;
  size_t cap = st->cap;
  limit_req_t r;
  int rc = LUA_ERRMEM;
  r.st = st;
  r.text = text;
  st->cap = 0;
  if (lua_checkstack(M, 3) && lua_checkstack(L, 1)) {
    lua_pushcfunction(M, push_limit_p);
    lua_pushlightuserdata(M, &r);
    rc = lua_pcall(M, 1, 1, 0);
    if (rc != LUA_OK) lua_pop(M, 1);
  }
  st->cap = cap;
  if (rc == LUA_OK)
    lua_xmove(M, L, 1);
  else
    lua_rawgetp(L, LUA_REGISTRYINDEX, &timeout_key);
}

/* Replaces the string message on top, when it holds NUL bytes, with its
 * text where each NUL is the two characters "\\0": the message is
 * prefixed and traced with C-string formats, and reaches the host as a C
 * string (ludo_session_errmsg), all of which would end it at the NUL.
 * [-1, +1, m] */
static void nul_top(lua_State *L) {
  size_t len, at = 0;
  const char *msg, *nul;
  luaL_Buffer b;
  if (lua_type(L, -1) != LUA_TSTRING) return;
  msg = lua_tolstring(L, -1, &len);
  if (memchr(msg, '\0', len) == NULL) return;
  luaL_buffinit(L, &b);
  while ((nul = memchr(msg + at, '\0', len - at)) != NULL) {
    luaL_addlstring(&b, msg + at, (size_t)(nul - msg) - at);
    luaL_addstring(&b, "\\0");
    at = (size_t)(nul - msg) + 1;
  }
  luaL_addlstring(&b, msg + at, len - at);
  luaL_pushresult(&b);
  lua_remove(L, -2);
}

static int state_error_p(lua_State *L) {
  err_req_t *r = lua_touserdata(L, 2);
  lua_settop(L, 1);
  nul_top(L);
  r->code = state_error(r->st, L, r->status, r->cap);
  /* A limit says where the call was when it was stopped: where the hook
   * or a budget check stopped it, or where the thread died. */
  if (r->code == LUDO_ETIMEOUT || r->code == LUDO_ENOMEM) {
    if (r->tb != NULL) ludo__state_locate(r->st, r->tb);
    if (r->st->located) {
      lua_pushfstring(L, " (at %s)", r->st->where);
      lua_concat(L, 2);
    }
  } else if (wants_traceback(r->code) && r->tb != NULL &&
           r->status == LUA_ERRRUN) {
    ludo__traceback(L, r->tb, lua_tostring(L, -1), 0);
    lua_remove(L, -2);
  }
  redact_top(L);
  utf8_top(L); /* the script's text, and the traceback's chunk names */
  return 1;
}

int ludo__state_error(ludo__state_t *st, lua_State *L, int status) {
  return ludo__state_error_tb(st, L, status, NULL);
}

int ludo__state_error_tb(ludo__state_t *st, lua_State *L, int status,
                         lua_State *tb) {
  /* The message needs a little memory, and the state may be at its cap,
   * or the whole heap exhausted: lift the cap, build the message under a
   * protected call, and fall back to a message made when the state was
   * opened. */
  err_req_t r;
  int rc;
  r.st = st;
  r.status = status;
  r.tb = tb;
  r.cap = st->cap;
  r.code = LUDO_ENOMEM;
  st->cap = 0;
  if (lua_checkstack(L, 3)) {
    lua_pushcfunction(L, state_error_p);
    lua_insert(L, -2);
    lua_pushlightuserdata(L, &r);
    rc = lua_pcall(L, 2, 1, 0);
  } else {
    rc = LUA_ERRMEM;
  }
  st->cap = r.cap;
  if (rc == LUA_OK) return r.code;
  lua_pop(L, 1);
  /* the code state_error would have given (an interrupt that came while
   * a call's result was encoded ends here too) */
  if (st->killed == LUDO__KILL_CLOSED ||
      st->killed == LUDO__KILL_INTERRUPTED) {
    lua_rawgetp(L, LUA_REGISTRYINDEX, st->killed == LUDO__KILL_CLOSED
                                          ? (const void *)&closed_key
                                          : (const void *)&cancel_key);
    return LUDO_ECANCELED;
  }
  if (st->killed && st->killed != LUDO__KILL_MEMORY) {
    lua_rawgetp(L, LUA_REGISTRYINDEX, &timeout_key);
    return LUDO_ETIMEOUT;
  }
  lua_rawgetp(L, LUA_REGISTRYINDEX, &nomem_key);
  return LUDO_ENOMEM;
}

/* Replaces the string on top, when longer than LUDO__SCRIPT_MSG_MAX, with
 * its first bytes (cut before a UTF-8 sequence that would not fit) and
 * " [... N more bytes]": the message is prefixed, traced and redacted
 * under a lifted cap, so those copies must not be of a message as big as
 * the cap. [-1, +1, m] */
static void clip_top(lua_State *L) {
  size_t len, keep;
  const char *msg = lua_tolstring(L, -1, &len);
  luaL_Buffer b;
  char more[48];
  if (msg == NULL || len <= LUDO__SCRIPT_MSG_MAX) return;
  keep = ludo__utf8_cut(msg, len, LUDO__SCRIPT_MSG_MAX);
  snprintf(more, sizeof more, " [... %zu more bytes]", len - keep);
  luaL_buffinit(L, &b);
  luaL_addlstring(&b, msg, keep);
  luaL_addstring(&b, more);
  luaL_pushresult(&b);
  lua_remove(L, -2);
}

static int state_error(ludo__state_t *st, lua_State *L, int status,
                       size_t cap) {
  const char *msg;
  int code;
  if (st->killed == LUDO__KILL_CLOSED ||
      st->killed == LUDO__KILL_INTERRUPTED) {
    lua_pop(L, 1);
    push_killed(L, st);
    return LUDO_ECANCELED;
  }
  if (st->killed && st->killed != LUDO__KILL_MEMORY) {
    lua_pop(L, 1);
    if (st->max_instr != 0 && st->instr > st->max_instr)
      lua_pushfstring(L, "ETIMEOUT: the call exceeded its budget of %I VM "
                         "instructions", (lua_Integer)st->max_instr);
    else if (st->killed == LUDO__KILL_WALL)
      lua_pushfstring(L, "ETIMEOUT: the call exceeded its wall-clock limit "
                         "of %I ms", (lua_Integer)(st->wall_ns / 1000000));
    else if (st->killed == LUDO__KILL_OUTER)
      lua_pushfstring(L, "ETIMEOUT: the call was stopped when the budget "
                         "of the call it ran inside (a host function's "
                         "caller) ran out, not its own CPU budget of %I "
                         "ms", (lua_Integer)(st->budget_ns / 1000000));
    else
      lua_pushfstring(L, "ETIMEOUT: the call exceeded its CPU budget of %I "
                         "ms", (lua_Integer)(st->budget_ns / 1000000));
    return LUDO_ETIMEOUT;
  }
  /* A memory error, or one that Lua code caught (a pcall in ludo's
   * library or the script's) and raised again, is one when memory did
   * fail in this call; the text alone, which a script can write (and
   * Lua's error() turns into LUA_ERRMEM), is not enough. */
  if ((status == LUA_ERRMEM || status == LUA_ERRRUN) && st->failed != 0 &&
      lua_type(L, -1) == LUA_TSTRING &&
      strcmp(lua_tostring(L, -1), "not enough memory") == 0) {
    lua_pop(L, 1);
    lua_pushfstring(L, "ENOMEM: the session's memory limit of %I bytes was "
                       "reached", (lua_Integer)cap);
    return LUDO_ENOMEM;
  }
  code = ludo__error_code(L, -1);
  if (code != 0) { /* raised by ludo's own code: the code is its own */
    ludo__error_push_message(L, -1);
    lua_remove(L, -2);
  }
  clip_top(L); /* a coded error's text may hold the script's too */
  if (code != 0) return code;
  msg = lua_tostring(L, -1);
  if (msg == NULL) {
    const char *tn = luaL_typename(L, -1);
    lua_pop(L, 1);
    lua_pushfstring(L, "ESCRIPT: (error object is a %s value)", tn);
    return LUDO_ESCRIPT;
  }
  /* Whatever its text says, a plain error is the script's. */
  if (strncmp(msg, "ESCRIPT: ", 9) != 0) {
    lua_pushfstring(L, "ESCRIPT: %s", msg);
    lua_remove(L, -2);
  }
  return LUDO_ESCRIPT;
}
