/* game.h - a small grid game whose world lives in C, and the "game" host
 * module through which a ludo environment (env.lua) drives it.
 *
 * This is the model for embedding ludo in a game engine: the engine owns
 * the simulation (here a W x H grid with walls, an agent and a goal), and
 * exposes a handful of C functions to Lua; the environment module written
 * in Lua turns them into reset/step/state, and a rubric written in Lua
 * turns observations into rewards.
 *
 * Coordinates are 1-based, x from the left, y from the top ("up" is y - 1),
 * as Lua code expects. A layout is a pure function of (w, h, seed): the same
 * seed always gives the same walls, start and goal, on every platform.
 *
 * Lua face (require("game") inside a session):
 *   game.new(w, h, seed) -> world     2 <= w, h <= GAME_MAX_SIDE
 *   game.stats() -> worlds, moves     host-wide counters (all sessions)
 *   world:move(dir) -> moved          dir is "up"|"down"|"left"|"right";
 *                                     false when a wall or the edge blocks
 *   world:position() -> x, y          the agent
 *   world:goal() -> x, y
 *   world:at_goal() -> boolean
 *   world:distance() -> n             shortest path length to the goal
 *   world:steps() -> n                moves tried since new()
 *   world:render() -> string          rows joined by "\n": '#' wall,
 *                                     '.' floor, 'A' agent, 'G' goal
 * The world is a userdata allocated with lua_newuserdatauv, so its bytes
 * count against the session's memory cap and vanish with the session's
 * state; it needs no __gc. */
#ifndef GAME_H
#define GAME_H

#include <stddef.h>
#include <stdint.h>

#include "ludo.h"

#define GAME_MAX_SIDE 64

/* Host-side data shared by every session of every runtime that uses the
 * module built by game_module(): the engine's own bookkeeping, reached by
 * the host functions through their `ud` upvalue. Single-threaded, like the
 * runtime that calls the functions. */
typedef struct game_host_s {
  unsigned long worlds; /* game.new() calls that built a world */
  unsigned long moves;  /* world:move() calls, blocked ones included */
  unsigned long goals;  /* moves that reached the goal */
} game_host_t;

/* Per-session host record. When the host stores one with
 * ludo_session_set_data(), world:move() finds it through
 * ludo_session_from_lua() and counts the session's moves in it. */
typedef struct game_session_s {
  unsigned long moves;
} game_session_t;

/* Fills `m` with the "game" host module; its functions get `host` as their
 * `ud`. `host` is borrowed until every environment loaded with `m` is
 * freed; `m` itself must stay valid as long (ludo borrows the array). */
void game_module(ludo_host_module_t *m, game_host_t *host);

#endif
