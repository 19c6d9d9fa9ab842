/* host.c - the gridworld's host library: game.c's "game" module as a
 * shared object that `ludo run` (and later `ludo serve` and `ludo eval`)
 * loads, so the environment runs without main.c's host program:
 *
 *   build/ludo run examples/gridworld --episodes 3 --seed 1
 *
 * manifest.json next to env.lua names it ("gridworld-host.so", found next
 * to the ludo binary: the Makefile's examples target builds it into
 * build/). It links neither libludo nor Lua: ludo_runtime_add_module,
 * ludo_session_from_lua and the Lua API come from the program that loads
 * it. The counters are the library's own: one set for every runtime of
 * the process, like a game engine's statistics. */
#include "game.h"
#include "ludo.h"

static game_host_t counters;

LUDO_EXTERN int ludo_host_init(ludo_runtime_t *rt, char *err,
                               size_t err_size) {
  ludo_host_module_t m;
  (void)err;
  (void)err_size; /* ludo_runtime_errmsg() says what went wrong */
  game_module(&m, &counters); /* ludo copies m; game.c's arrays stay */
  return ludo_runtime_add_module(rt, &m);
}
