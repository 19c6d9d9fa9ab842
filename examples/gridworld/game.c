/* game.c - the grid game (a world that lives in C) and its "game" host
 * module for ludo; see game.h for the Lua face. */
#include "game.h"

#include <lauxlib.h>
#include <lua.h>
#include <string.h>

/* Metatable name of world userdata, in each session's registry. */
#define GAME_WORLD_MT "game.world"

/* ---- the world, plain C ------------------------------------------------ */

/* A world: the userdata block itself (header + one byte per cell). Inside
 * C, coordinates are 0-based; the Lua face adds 1. */
typedef struct game_world_s {
  int w, h;
  int ax, ay;             /* agent */
  int gx, gy;             /* goal */
  unsigned long steps;    /* moves tried */
  lua_Integer seed;       /* layout seed */
  unsigned char cells[];  /* w * h, 1 = wall, row-major from the top */
} game_world_t;

static const int dir_dx[4] = {0, 0, -1, 1};
static const int dir_dy[4] = {-1, 1, 0, 0};
static const char *const dir_names[] = {"up", "down", "left", "right",
                                        NULL};

/* splitmix64: a tiny deterministic generator, the same on every platform
 * (unlike rand()). */
static uint64_t rng_next(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static int rng_below(uint64_t *state, int n) {
  return (int)(rng_next(state) % (uint64_t)n);
}

static int is_wall(const game_world_t *g, int x, int y) {
  return x < 0 || y < 0 || x >= g->w || y >= g->h || g->cells[y * g->w + x];
}

/* Shortest path length from (x, y) to the goal over floor cells, by
 * breadth-first search; -1 when the goal cannot be reached. */
static int world_distance_from(const game_world_t *g, int x, int y) {
  static const int none = -1;
  int dist[GAME_MAX_SIDE * GAME_MAX_SIDE];
  int queue[GAME_MAX_SIDE * GAME_MAX_SIDE];
  int head = 0, tail = 0, i, n = g->w * g->h;
  for (i = 0; i < n; i++) dist[i] = none;
  dist[y * g->w + x] = 0;
  queue[tail++] = y * g->w + x;
  while (head < tail) {
    int cur = queue[head++], cx = cur % g->w, cy = cur / g->w, d;
    if (cx == g->gx && cy == g->gy) return dist[cur];
    for (d = 0; d < 4; d++) {
      int nx = cx + dir_dx[d], ny = cy + dir_dy[d];
      if (is_wall(g, nx, ny) || dist[ny * g->w + nx] != none) continue;
      dist[ny * g->w + nx] = dist[cur] + 1;
      queue[tail++] = ny * g->w + nx;
    }
  }
  return none;
}

/* Picks a random floor cell; returns 0 when there is none. */
static int random_floor(const game_world_t *g, uint64_t *rng, int *x,
                        int *y) {
  int tries;
  for (tries = 0; tries < 4 * g->w * g->h; tries++) {
    int cx = rng_below(rng, g->w), cy = rng_below(rng, g->h);
    if (!is_wall(g, cx, cy)) {
      *x = cx;
      *y = cy;
      return 1;
    }
  }
  return 0;
}

/* Builds the layout of `g` (w, h set) from `seed`: about one wall in five,
 * a start and a goal at least (w + h) / 2 moves apart along a path that
 * exists. After 64 failed draws it falls back to an empty room with the
 * agent and the goal in opposite corners. */
static void world_layout(game_world_t *g, lua_Integer seed) {
  uint64_t rng = (uint64_t)seed;
  int attempt, i, n = g->w * g->h, want = (g->w + g->h) / 2;
  g->seed = seed;
  g->steps = 0;
  for (attempt = 0; attempt < 64; attempt++) {
    int d;
    for (i = 0; i < n; i++) g->cells[i] = rng_below(&rng, 100) < 20;
    if (!random_floor(g, &rng, &g->ax, &g->ay) ||
        !random_floor(g, &rng, &g->gx, &g->gy))
      continue;
    if (g->ax == g->gx && g->ay == g->gy) continue;
    d = world_distance_from(g, g->ax, g->ay);
    if (d >= want) return;
  }
  memset(g->cells, 0, (size_t)n);
  g->ax = g->ay = 0;
  g->gx = g->w - 1;
  g->gy = g->h - 1;
}

/* ---- the host module ---------------------------------------------------- */

/* The world at index i, or raises. [-0, +0, v] */
static game_world_t *game_l_check_world(lua_State *L, int i) {
  return luaL_checkudata(L, i, GAME_WORLD_MT);
}

/* The host data every function gets as upvalue 1. [-0, +0, -] */
static game_host_t *game_l_host(lua_State *L) {
  return lua_touserdata(L, lua_upvalueindex(1));
}

/* world:move(dir) -> moved. Counts the move in the host data (upvalue) and
 * in the calling session's record, found through ludo_session_from_lua().
 * [-0, +1, v] */
static int game_l_world_move(lua_State *L) {
  game_world_t *g = game_l_check_world(L, 1);
  int dir = luaL_checkoption(L, 2, NULL, dir_names);
  game_host_t *host = game_l_host(L);
  ludo_session_t *s = ludo_session_from_lua(L);
  game_session_t *rec = s ? ludo_session_get_data(s) : NULL;
  int nx = g->ax + dir_dx[dir], ny = g->ay + dir_dy[dir];
  int moved = !is_wall(g, nx, ny);
  g->steps++;
  host->moves++;
  if (rec != NULL) rec->moves++;
  if (moved) {
    g->ax = nx;
    g->ay = ny;
    if (g->ax == g->gx && g->ay == g->gy) host->goals++;
  }
  lua_pushboolean(L, moved);
  return 1;
}

/* world:position() -> x, y (1-based). [-0, +2, v] */
static int game_l_world_position(lua_State *L) {
  game_world_t *g = game_l_check_world(L, 1);
  lua_pushinteger(L, g->ax + 1);
  lua_pushinteger(L, g->ay + 1);
  return 2;
}

/* world:goal() -> x, y (1-based). [-0, +2, v] */
static int game_l_world_goal(lua_State *L) {
  game_world_t *g = game_l_check_world(L, 1);
  lua_pushinteger(L, g->gx + 1);
  lua_pushinteger(L, g->gy + 1);
  return 2;
}

/* world:at_goal() -> boolean. [-0, +1, v] */
static int game_l_world_at_goal(lua_State *L) {
  game_world_t *g = game_l_check_world(L, 1);
  lua_pushboolean(L, g->ax == g->gx && g->ay == g->gy);
  return 1;
}

/* world:distance() -> shortest path length to the goal. [-0, +1, v] */
static int game_l_world_distance(lua_State *L) {
  game_world_t *g = game_l_check_world(L, 1);
  lua_pushinteger(L, world_distance_from(g, g->ax, g->ay));
  return 1;
}

/* world:steps() -> moves tried since new(). [-0, +1, v] */
static int game_l_world_steps(lua_State *L) {
  game_world_t *g = game_l_check_world(L, 1);
  lua_pushinteger(L, (lua_Integer)g->steps);
  return 1;
}

/* world:render() -> the board, rows joined by "\n". [-0, +1, m] */
static int game_l_world_render(lua_State *L) {
  game_world_t *g = game_l_check_world(L, 1);
  luaL_Buffer b;
  int x, y;
  luaL_buffinit(L, &b);
  for (y = 0; y < g->h; y++) {
    if (y > 0) luaL_addchar(&b, '\n');
    for (x = 0; x < g->w; x++) {
      char c = g->cells[y * g->w + x] ? '#' : '.';
      if (x == g->gx && y == g->gy) c = 'G';
      if (x == g->ax && y == g->ay) c = 'A';
      luaL_addchar(&b, c);
    }
  }
  luaL_pushresult(&b);
  return 1;
}

/* tostring(world) -> "game.world 8x6 seed 42". [-0, +1, m] */
static int game_l_world_tostring(lua_State *L) {
  game_world_t *g = game_l_check_world(L, 1);
  lua_pushfstring(L, "game.world %dx%d seed %I", g->w, g->h, g->seed);
  return 1;
}

static const luaL_Reg game_world_methods[] = {
    {"move", game_l_world_move},         {"position", game_l_world_position},
    {"goal", game_l_world_goal},         {"at_goal", game_l_world_at_goal},
    {"distance", game_l_world_distance}, {"steps", game_l_world_steps},
    {"render", game_l_world_render},     {"__tostring", game_l_world_tostring},
    {NULL, NULL}};

/* game.new(w, h [, seed]) -> world. The metatable is made once per session
 * state, with the host data as the methods' upvalue. [-0, +1, m] */
static int game_l_new(lua_State *L) {
  lua_Integer w = luaL_checkinteger(L, 1);
  lua_Integer h = luaL_checkinteger(L, 2);
  lua_Integer seed = luaL_optinteger(L, 3, 0);
  game_host_t *host = game_l_host(L);
  game_world_t *g;
  luaL_argcheck(L, w >= 2 && w <= GAME_MAX_SIDE, 1, "width out of range");
  luaL_argcheck(L, h >= 2 && h <= GAME_MAX_SIDE, 2, "height out of range");
  /* The whole world is one userdata: its bytes count against the
   * session's memory cap, and it goes away with the session. */
  g = lua_newuserdatauv(L, sizeof *g + (size_t)(w * h), 0);
  g->w = (int)w;
  g->h = (int)h;
  world_layout(g, seed);
  if (luaL_newmetatable(L, GAME_WORLD_MT)) {
    /* stack: world, mt */
    lua_pushvalue(L, lua_upvalueindex(1));
    luaL_setfuncs(L, game_world_methods, 1);
    lua_pushvalue(L, -1);
    lua_setfield(L, -2, "__index");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable"); /* scripts cannot change it */
  }
  lua_setmetatable(L, -2);
  host->worlds++;
  return 1;
}

/* game.stats() -> worlds, moves, goals: the host-wide counters, shared by
 * every session (they live in the host, not in any Lua state).
 * [-0, +3, -] */
static int game_l_stats(lua_State *L) {
  game_host_t *host = game_l_host(L);
  lua_pushinteger(L, (lua_Integer)host->worlds);
  lua_pushinteger(L, (lua_Integer)host->moves);
  lua_pushinteger(L, (lua_Integer)host->goals);
  return 3;
}

/* ludo.h declares host functions as int (*)(void *) so that it does not
 * need lua.h; ludo calls them as lua_CFunction. The cast goes through a
 * generic function pointer type. */
#define GAME_HOST_FN(f) ((int (*)(void *))(void (*)(void))(f))

static const ludo_host_func_t game_funcs[] = {
    {"new", GAME_HOST_FN(game_l_new)},
    {"stats", GAME_HOST_FN(game_l_stats)},
    {NULL, NULL}};

void game_module(ludo_host_module_t *m, game_host_t *host) {
  m->name = "game";
  m->funcs = game_funcs;
  m->ud = host;
}
