/* main.c - the gridworld example: a C host (think: a game engine) that owns
 * the world (game.c), gives it to a Lua environment as the "game" host
 * module, and plays episodes from its own frame loop with ludo's
 * non-blocking API and a policy written in C.
 *
 *   usage: gridworld [episodes] [path-to-examples/gridworld]
 *
 * Each frame the host starts at most one call per idle session
 * (ludo_session_reset_async / ludo_session_step_async) and then gives ludo
 * a frame budget: ludo_runtime_poll(rt, FRAME_BUDGET_US) runs the queued
 * calls and completion callbacks for at most that long (Lua that runs
 * longer is time-sliced and goes on in the next frame). Nothing here
 * blocks: a real engine would render and simulate between polls. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "game.h"
#include "ludo.h"

#define NSESSIONS 4
#define SEED_BASE 1000
#define MAX_FRAMES 100000
#define FRAME_BUDGET_US 2000 /* ludo's share of a frame */
#define BOARD_MAX (GAME_MAX_SIDE * (GAME_MAX_SIDE + 1) + 1)

typedef struct host_s host_t;

/* One agent per session: its episode, its last board, and the record that
 * game.c finds through ludo_session_get_data() (see game.h). */
typedef struct agent_s {
  host_t *host;
  int index;
  ludo_session_t *s;
  game_session_t game;
  int busy;          /* a call is in flight */
  int episode;       /* 1-based episode being played; 0 = none */
  int steps;
  int shortest;      /* start_distance of the episode */
  int distance;      /* distance to the goal after the last call */
  double total;      /* sum of rewards */
  char board[BOARD_MAX];
} agent_t;

struct host_s {
  agent_t agents[NSESSIONS];
  int episodes;      /* to play */
  int next_episode;  /* next to hand out */
  int finished, reached, failures;
  long steps;
};

/* ---- the policy ------------------------------------------------------ */

/* Chooses a move from the board text ('#' wall, 'A' agent, 'G' goal, rows
 * joined by '\n'): a breadth-first search from the goal gives every cell
 * its distance, and the agent steps to the neighbour that is closest.
 * Greedy on the true distance, so it never walks into a dead end. Returns
 * NULL when no move helps (no agent, no goal or no path). */
static const char *policy_move(const char *board) {
  static const int dx[4] = {0, 0, -1, 1}, dy[4] = {-1, 1, 0, 0};
  static const char *const names[4] = {"up", "down", "left", "right"};
  int dist[GAME_MAX_SIDE * GAME_MAX_SIDE], queue[GAME_MAX_SIDE * GAME_MAX_SIDE];
  int w = 0, h = 0, x = 0, ax = -1, ay = -1, gx = -1, gy = -1;
  int head = 0, tail = 0, i, best = -1, bestd = -1;
  const char *p;
  char cells[GAME_MAX_SIDE * GAME_MAX_SIDE];
  for (p = board; *p; p++) {
    if (*p == '\n') {
      if (h == 0) w = x;
      if (x != w || ++h >= GAME_MAX_SIDE) return NULL;
      x = 0;
      continue;
    }
    if (x >= GAME_MAX_SIDE) return NULL;
    if (*p == 'A') ax = x, ay = h;
    if (*p == 'G') gx = x, gy = h;
    cells[h * GAME_MAX_SIDE + x++] = *p;
  }
  if (h == 0) w = x;
  if (x != w) return NULL;
  h++;
  if (ax < 0 || gx < 0) return NULL;
  for (i = 0; i < GAME_MAX_SIDE * GAME_MAX_SIDE; i++) dist[i] = -1;
  dist[gy * GAME_MAX_SIDE + gx] = 0;
  queue[tail++] = gy * GAME_MAX_SIDE + gx;
  while (head < tail) {
    int cur = queue[head++], cx = cur % GAME_MAX_SIDE, cy = cur / GAME_MAX_SIDE;
    int d;
    for (d = 0; d < 4; d++) {
      int nx = cx + dx[d], ny = cy + dy[d], n = ny * GAME_MAX_SIDE + nx;
      if (nx < 0 || ny < 0 || nx >= w || ny >= h) continue;
      if (cells[n] == '#' || dist[n] >= 0) continue;
      dist[n] = dist[cur] + 1;
      queue[tail++] = n;
    }
  }
  for (i = 0; i < 4; i++) {
    int nx = ax + dx[i], ny = ay + dy[i], n = ny * GAME_MAX_SIDE + nx;
    if (nx < 0 || ny < 0 || nx >= w || ny >= h || dist[n] < 0) continue;
    if (best < 0 || dist[n] < bestd) best = i, bestd = dist[n];
  }
  return best < 0 ? NULL : names[best];
}

/* ---- completions ----------------------------------------------------- */

/* Reads what the host needs from a reset/step result. Returns 0, or -1
 * when the JSON is not what the environment promises. */
static int read_result(agent_t *a, const char *data, size_t len,
                       double *reward, int *done) {
  json_error_t jerr;
  json_t *root = json_loadb(data, len, 0, &jerr), *obs, *board;
  int rc = -1;
  if (root == NULL) return -1;
  obs = json_object_get(root, "observation");
  board = json_object_get(obs, "board");
  if (json_is_string(board) && json_string_length(board) < sizeof a->board) {
    memcpy(a->board, json_string_value(board), json_string_length(board) + 1);
    *reward = json_number_value(json_object_get(root, "reward"));
    *done = json_is_true(json_object_get(root, "done"));
    a->distance = (int)json_integer_value(json_object_get(obs, "distance"));
    if (a->steps == 0)
      a->shortest = (int)json_integer_value(
          json_object_get(obs, "start_distance"));
    rc = 0;
  }
  json_decref(root);
  return rc;
}

static void fail(agent_t *a, const char *what, int status, const char *msg,
                 size_t len) {
  fprintf(stderr, "gridworld: session %d: %s failed: %s: %.*s\n", a->index,
          what, ludo_err_name(status), (int)len, msg);
  a->host->failures++;
  a->episode = 0;
}

static void on_reset(ludo_session_t *s, int status, const char *data,
                     size_t len, void *ud) {
  agent_t *a = ud;
  double reward;
  int done;
  (void)s;
  a->busy = 0;
  if (status != 0) {
    fail(a, "reset", status, data, len);
    return;
  }
  a->steps = 0;
  a->total = 0.0;
  if (read_result(a, data, len, &reward, &done) != 0) {
    fail(a, "reset", LUDO_EVALUE, data, len);
  }
}

static void on_step(ludo_session_t *s, int status, const char *data,
                    size_t len, void *ud) {
  agent_t *a = ud;
  host_t *h = a->host;
  double reward = 0.0;
  int done = 0;
  (void)s;
  a->busy = 0;
  if (status != 0) {
    fail(a, "step", status, data, len);
    return;
  }
  a->steps++;
  h->steps++;
  if (read_result(a, data, len, &reward, &done) != 0) {
    fail(a, "step", LUDO_EVALUE, data, len);
    return;
  }
  a->total += reward;
  if (!done) return;
  {
    int reached = a->distance == 0;
    printf("episode %2d (session %d): %3d steps (shortest %2d), total reward "
           "%5.2f, %s\n", a->episode, a->index, a->steps, a->shortest,
           a->total, reached ? "reached the goal" : "step limit");
    h->reached += reached;
  }
  h->finished++;
  a->episode = 0;
}

/* ---- the frame loop -------------------------------------------------- */

/* Starts the next call of an idle agent, if it has something to do. */
static int start_call(agent_t *a) {
  host_t *h = a->host;
  int rc;
  if (a->episode == 0) {
    char opts[64];
    if (h->next_episode > h->episodes) return 0;
    a->episode = h->next_episode++;
    snprintf(opts, sizeof opts, "{\"seed\":%d}", SEED_BASE + a->episode);
    rc = ludo_session_reset_async(a->s, opts, strlen(opts), on_reset, a);
  } else {
    char action[48];
    const char *move = policy_move(a->board);
    if (move == NULL) move = "up"; /* no path: any move ends in the limit */
    snprintf(action, sizeof action, "{\"move\":\"%s\"}", move);
    rc = ludo_session_step_async(a->s, action, strlen(action), on_step, a);
  }
  if (rc != 0) {
    /* A synchronous failure: the callback will not run. */
    fprintf(stderr, "gridworld: session %d: %s\n", a->index,
            ludo_strerror(rc));
    h->failures++;
    a->episode = 0;
    return rc;
  }
  a->busy = 1;
  return 0;
}

static int file_exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0;
}

/* The environment folder: argv[2], else examples/gridworld from the
 * current directory, else next to the binary (build/../examples/...). */
static const char *env_path(int argc, char **argv, char *buf, size_t size) {
  const char *slash;
  if (argc > 2) return argv[2];
  if (file_exists("examples/gridworld/env.lua")) return "examples/gridworld";
  slash = strrchr(argv[0], '/');
  if (slash != NULL) {
    snprintf(buf, size, "%.*s/../examples/gridworld", (int)(slash - argv[0]),
             argv[0]);
    if (file_exists(buf)) return buf;
  }
  return "examples/gridworld";
}

int main(int argc, char **argv) {
  static host_t h;
  game_host_t game_data = {0, 0, 0};
  ludo_host_module_t module;
  ludo_env_options_t eopts;
  ludo_runtime_t *rt = NULL;
  ludo_env_t *env = NULL;
  ludo_stats_t stats;
  char pathbuf[4096];
  const char *path;
  unsigned long session_moves = 0;
  long frames = 0;
  int i, rc, ok;

  h.episodes = argc > 1 ? atoi(argv[1]) : 8;
  if (h.episodes < 1 || (argc > 1 && strcmp(argv[1], "-h") == 0)) {
    fprintf(stderr, "usage: %s [episodes] [path-to-examples/gridworld]\n",
            argv[0]);
    return 2;
  }
  path = env_path(argc, argv, pathbuf, sizeof pathbuf);
  h.next_episode = 1;

  rc = ludo_runtime_new(&rt, NULL);
  if (rc != 0) {
    fprintf(stderr, "gridworld: %s\n", ludo_strerror(rc));
    return 1;
  }
  /* The environment's states can require("game"): our C functions, with
   * &game_data as their ud. */
  game_module(&module, &game_data);
  ludo_env_options_init(&eopts);
  eopts.modules = &module;
  eopts.nmodules = 1;
  rc = ludo_env_load(rt, path, &eopts, &env);
  if (rc != 0) {
    fprintf(stderr, "gridworld: cannot load %s: %s\n(run from the "
            "repository root, or pass the path)\n", path,
            ludo_runtime_errmsg(rt));
    ludo_runtime_free(rt);
    return 1;
  }
  for (i = 0; i < NSESSIONS; i++) {
    agent_t *a = &h.agents[i];
    a->host = &h;
    a->index = i + 1;
    rc = ludo_session_open(env, &a->s);
    if (rc != 0) {
      fprintf(stderr, "gridworld: session: %s\n", ludo_runtime_errmsg(rt));
      ludo_runtime_free(rt);
      return 1;
    }
    ludo_session_set_data(a->s, &a->game);
  }

  /* The host's frame loop: start what is idle, give ludo its budget,
   * "render". */
  while (h.finished + h.failures < h.episodes && frames < MAX_FRAMES) {
    for (i = 0; i < NSESSIONS; i++)
      if (!h.agents[i].busy) start_call(&h.agents[i]);
    rc = ludo_runtime_poll(rt, FRAME_BUDGET_US);
    if (rc < 0) {
      fprintf(stderr, "gridworld: poll: %s\n", ludo_strerror(rc));
      break;
    }
    frames++;
  }

  ludo_runtime_stats(rt, &stats);
  printf("%d episodes, %d reached the goal, %ld steps in %ld frames, "
         "%u sessions, %zu bytes of Lua\n", h.finished, h.reached, h.steps,
         frames, stats.sessions, stats.lua_bytes);
  printf("host counters (game.c, through ud): %lu worlds, %lu moves, "
         "%lu goals\n", game_data.worlds, game_data.moves, game_data.goals);
  printf("moves per session (through ludo_session_from_lua):");
  for (i = 0; i < NSESSIONS; i++) {
    printf(" %lu", h.agents[i].game.moves);
    session_moves += h.agents[i].game.moves;
  }
  printf("\n");

  for (i = 0; i < NSESSIONS; i++) ludo_session_close(h.agents[i].s);
  ludo_env_free(env);
  ludo_runtime_free(rt);

  /* Every count seen by the host functions must match what the host saw
   * through the API. */
  ok = h.failures == 0 && h.finished == h.episodes &&
       game_data.moves == (unsigned long)h.steps &&
       session_moves == game_data.moves &&
       game_data.goals == (unsigned long)h.reached &&
       game_data.worlds == (unsigned long)h.episodes;
  if (!ok) fprintf(stderr, "gridworld: counts do not add up\n");
  return ok ? 0 : 1;
}
