/* guards.c - the sandbox's replacements for library functions whose work
 * runs in one C loop, where the count hook never fires: each checks its
 * input or cuts the work into pieces and checks the call's CPU budget
 * between them (docs/sandbox.md, "Loops inside C").
 *
 *   string.rep(s, n [, sep])  refuses results past the session's memory
 *                             limit up front, and returns "" at once for
 *                             an empty result (Lua loops n times even when
 *                             nothing is copied);
 *   table.move(a1, f, e, t [, a2])  moves in pieces of 64Ki elements,
 *                             checking the budget between pieces (moving
 *                             absent keys allocates nothing, so neither the
 *                             memory cap nor the hook would stop it).
 *
 * The loops of table.insert, table.remove, table.concat and table.sort
 * call check_budget every 1,024 steps through ludo's patched Lua
 * (lua_setloopcheck, scripts/patches/lua-5.4.4-loop-limits.patch): their
 * length comes from __len, so a table that is not there keeps them going
 * with raw accesses or C metamethods and no Lua instruction. An
 * allocation the cap refuses runs an emergency collection only while the
 * call is not stopped (lua_setemergencycheck, may_collect below). */
#include "script/guards.h"

#include <lauxlib.h>
#include <lualib.h>
#include <pthread.h>

#include "core/error.h"
#include "core/luashare.h"
#include "script/state.h"

#define MOVE_PIECE 65536

/* Raises the budget's error when the call is over it. [-0, +0, v] */
static void check_budget(lua_State *L) {
  if (ludo__state_check(L)) lua_error(L);
}

/* string.rep(s, n [, sep]); upvalue 1: the library's. */
static int g_rep(lua_State *L) {
  size_t l, lsep;
  lua_Integer n;
  ludo__state_t *st = ludo__state_of(L);
  luaL_checklstring(L, 1, &l);
  n = luaL_checkinteger(L, 2);
  luaL_optlstring(L, 3, "", &lsep);
  if (n <= 0 || (l == 0 && (lsep == 0 || n == 1))) {
    lua_pushliteral(L, "");
    return 1;
  }
  if (st != NULL && st->cap != 0) {
    /* n*l + (n-1)*lsep, without overflow */
    size_t cap = st->cap, per = l + lsep;
    if (per < l || (size_t)n - 1 > cap / per ||
        (size_t)n * l + ((size_t)n - 1) * lsep > cap)
      return ludo__error_raise(L, LUDO_ENOMEM, "string.rep: the result "
                               "would exceed the session's memory limit "
                               "of %I bytes", (lua_Integer)cap);
  }
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 1);
  return 1;
}

/* Calls the library's table.move on one piece. */
static void move_piece(lua_State *L, int dst, lua_Integer f, lua_Integer e,
                       lua_Integer t) {
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_pushvalue(L, 1);
  lua_pushinteger(L, f);
  lua_pushinteger(L, e);
  lua_pushinteger(L, t);
  lua_pushvalue(L, dst);
  lua_call(L, 5, 0);
  check_budget(L);
}

/* table.move(a1, f, e, t [, a2]); upvalue 1: the library's. */
static int g_move(lua_State *L) {
  lua_Integer f = luaL_checkinteger(L, 2);
  lua_Integer e = luaL_checkinteger(L, 3);
  lua_Integer t = luaL_checkinteger(L, 4);
  lua_Integer n, k;
  int dst = !lua_isnoneornil(L, 5) ? 5 : 1;
  if (e < f || e - f < MOVE_PIECE) { /* small: the library's, as is */
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
  }
  luaL_argcheck(L, f > 0 || e < LUA_MAXINTEGER + f, 3,
                "too many elements to move");
  n = e - f;
  luaL_argcheck(L, t <= LUA_MAXINTEGER - n, 4, "destination wrap around");
  if (t > e || t <= f || (dst != 1 && !lua_compare(L, 1, dst, LUA_OPEQ))) {
    for (k = 0; k <= n; k += MOVE_PIECE) { /* no overlap: forwards */
      lua_Integer hi = n - k < MOVE_PIECE ? n : k + MOVE_PIECE - 1;
      move_piece(L, dst, f + k, f + hi, t + k);
    }
  } else {
    for (k = n; k >= 0; k -= MOVE_PIECE) { /* overlap: backwards */
      lua_Integer lo = k < MOVE_PIECE ? 0 : k - MOVE_PIECE + 1;
      move_piece(L, dst, f + lo, f + k, t + lo);
    }
  }
  lua_pushvalue(L, dst);
  return 1;
}

static void replace(lua_State *L, const char *lib, const char *name,
                    lua_CFunction fn) {
  lua_getglobal(L, lib);
  lua_getfield(L, -1, name);
  lua_pushcclosure(L, fn, 1);
  lua_setfield(L, -2, name);
  lua_pop(L, 1);
}

static pthread_once_t loopcheck_once = PTHREAD_ONCE_INIT;

/* May a refused allocation of L's running call run an emergency
 * collection? Not once the call is stopped: it would only spend time the
 * call no longer has (see lua-5.4.4-emergency-gc.patch). */
static int may_collect(lua_State *L) { return !ludo__state_over(L); }

static void set_loopcheck(void) {
  if (lua_setloopcheck != NULL) lua_setloopcheck(check_budget);
  if (lua_setemergencycheck != NULL) lua_setemergencycheck(may_collect);
}

void ludo__guards_install(lua_State *L) {
  pthread_once(&loopcheck_once, set_loopcheck);
  replace(L, LUA_STRLIBNAME, "rep", g_rep);
  replace(L, LUA_TABLIBNAME, "move", g_move);
}
