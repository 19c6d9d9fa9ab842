/* core_bench.c - the runtime's figures through the public C API, each
 * beside a baseline measured in the same run (these machines are noisy:
 * compare ratios across runs, not absolute numbers). Prints a table and
 * writes the same rows as JSON (build/bench.json).
 *
 *   open.cold       open + reset + close with an empty pool (prewarm 0),
 *                   p50; baseline luaL_newstate + luaL_openlibs + lua_close
 *   open.pooled     open + close from the pool, p50; the pool is refilled
 *                   by an untimed ludo_runtime_poll(rt, 0) between cycles
 *   rss.session     process RSS added per idle echo session (5,000 opened
 *                   and reset once), and the share of it left after closing
 *                   them all; baseline the same for bare Lua states
 *   memory.idle     Lua heap of one idle echo session after a full GC
 *   step.echo @N    echo steps/s, N sessions stepped round-robin (blocking)
 *                   or all at once (step_async on each, ludo_runtime_run;
 *                   or one ludo_session_step_batch of the N)
 *   step.noop       no-op steps/s, blocking and batched over 256 sessions
 *                   (ludo_session_step_batch); baseline an empty lua_pcall
 *   latency.*       p50/p99/p99.9 of one echo step and of an async round
 *                   of 256 sessions
 *   poll.overshoot  wall time of ludo_runtime_poll(rt, 1000) while a
 *                   session spins
 *   json.echo       an echo step against jansson json_loadb + json_dumps
 *                   of the same action
 *   rubric.*        a rubric tree's cost per step (bench/envs/rubrics/)
 *
 * Each group runs in a child process of its own, so one group's heap
 * (4,096 sessions, 5,000 closed ones) never weighs on the next and RSS is
 * read from a clean process. Throughputs are medians over rounds that
 * interleave the figure with its baseline; percentiles are taken over a
 * large sample per run, and the median of 3 runs is reported. The parent
 * reports each group's wall time, CPU time and preemptions (stderr and
 * the JSON), which tell a run on a loaded machine apart.
 *
 * usage: build/ludo-bench [--json PATH] [--only GROUP[,GROUP]] [scale]
 *        (run from the repo root; scale multiplies the sample sizes) */
#include <fcntl.h>
#include <jansson.h>
#include <lauxlib.h>
#include <lualib.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ludo.h"
#include "table.h"

/* ---- rows ------------------------------------------------------------ */

/* What a group's child cost: wall and CPU time, and how often the kernel
 * took the CPU away from it (a sign of load from other processes). */
typedef struct gstat_s {
  const char *name;
  double wall_s, cpu_s;
  long nivcsw;
} gstat_t;

static int g_rows_fd = -1;  /* child: where rows go */
static int g_scale = 1;

static void emit(const char *fig, const char *unit, double m,
                 const char *bwhat, double b, int tkind, int ton,
                 double tval) {
  row_t r;
  bench_row(&r, fig, unit, m, bwhat, b, tkind, ton, tval);
  if (write(g_rows_fd, &r, sizeof r) != (ssize_t)sizeof r) _exit(3);
}

/* ---- helpers --------------------------------------------------------- */

/* CPU time of the calling thread (the one running ludo), in µs: a round
 * timed this way leaves out the time other processes took the core. */
static double cpu_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void die(const char *what, int rc) {
  fprintf(stderr, "bench: %s: %s (%s)\n", what, ludo_err_name(rc),
          ludo_strerror(rc));
  exit(1);
}

static void die_s(ludo_session_t *s, const char *what, int rc) {
  fprintf(stderr, "bench: %s: %s: %s\n", what, ludo_err_name(rc),
          ludo_session_errmsg(s));
  exit(1);
}

/* Resident set size of this process, in bytes (/proc/self/statm, read
 * without malloc so the reading does not move the heap). */
static double rss_bytes(void) {
  char buf[128];
  long size = 0, rss = 0;
  ssize_t n;
  int fd = open("/proc/self/statm", O_RDONLY);
  if (fd < 0) return NAN;
  n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return NAN;
  buf[n] = '\0';
  if (sscanf(buf, "%ld %ld", &size, &rss) != 2) return NAN;
  return (double)rss * (double)sysconf(_SC_PAGESIZE);
}

/* The baseline state: what the issue compares a session with. */
static lua_State *bare_openlibs(void) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  return L;
}

/* The 6 libraries a session state opens (the previous bench's baseline). */
static lua_State *bare_six(void) {
  lua_State *L = luaL_newstate();
  luaL_requiref(L, "_G", luaopen_base, 1);
  luaL_requiref(L, "table", luaopen_table, 1);
  luaL_requiref(L, "string", luaopen_string, 1);
  luaL_requiref(L, "math", luaopen_math, 1);
  luaL_requiref(L, "utf8", luaopen_utf8, 1);
  luaL_requiref(L, "coroutine", luaopen_coroutine, 1);
  lua_settop(L, 0);
  return L;
}

static ludo_runtime_t *runtime_new(unsigned prewarm, uint32_t cpu_ms) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  int rc;
  ludo_options_init(&o);
  o.module_path = ".";
  o.prewarm = prewarm;
  if (cpu_ms) o.cpu_budget_ms = cpu_ms;
  if ((rc = ludo_runtime_new(&rt, &o)) != 0) die("runtime", rc);
  return rt;
}

static ludo_env_t *env_load(ludo_runtime_t *rt, const char *path) {
  ludo_env_t *env;
  int rc = ludo_env_load(rt, path, NULL, &env);
  if (rc != 0) {
    fprintf(stderr, "bench: %s: %s\n", path, ludo_runtime_errmsg(rt));
    exit(1);
  }
  return env;
}

static ludo_session_t *open_reset(ludo_env_t *env) {
  ludo_session_t *s;
  const char *out;
  size_t len;
  int rc;
  if ((rc = ludo_session_open(env, &s)) != 0) die("open", rc);
  if ((rc = ludo_session_reset(s, "{}", 2, &out, &len)) != 0)
    die_s(s, "reset", rc);
  return s;
}

static unsigned prewarmed(ludo_runtime_t *rt) {
  ludo_stats_t st;
  if (ludo_runtime_stats(rt, &st) != 0) return 0;
  return st.prewarmed;
}

/* Polls until the pools hold `want` states (or 50 polls went by). */
/* Runs the loop as a host that owns it would: at least one pass, so the
 * runtime knows the loop runs and leaves refills to it (a close then
 * never builds a state in the caller's time: that happens only when the
 * loop has not run for 50 ms, which a loaded host's slow rounds reached),
 * and more passes until `want` states are ready. */
static void refill(ludo_runtime_t *rt, unsigned want) {
  int i = 0;
  do ludo_runtime_poll(rt, 0);
  while (++i < 50 && prewarmed(rt) < want);
}

static const char ECHO[] = "{\"message\":\"hello\"}";
#define ECHO_LEN (sizeof ECHO - 1)

static void step_echo(ludo_session_t *s) {
  const char *out;
  size_t len;
  int rc = ludo_session_step(s, ECHO, ECHO_LEN, &out, &len);
  if (rc != 0) die_s(s, "step", rc);
}

static void count_cb(ludo_session_t *s, int status, const char *data,
                     size_t len, void *ud) {
  if (status != 0) {
    fprintf(stderr, "bench: async step: %s: %.*s\n", ludo_err_name(status),
            (int)len, data);
    exit(1);
  }
  ++*(long *)ud;
}

/* One asynchronous round: a step queued on each of the n sessions, then
 * the loop run until every callback came. */
static void async_round(ludo_runtime_t *rt, ludo_session_t **ss, int n) {
  long done = 0;
  int j, rc;
  for (j = 0; j < n; j++)
    if ((rc = ludo_session_step_async(ss[j], ECHO, ECHO_LEN, count_cb,
                                      &done)) != 0)
      die_s(ss[j], "step_async", rc);
  if ((rc = ludo_runtime_run(rt)) != 0) die("run", rc);
  if (done != n) {
    fprintf(stderr, "bench: async round: %ld of %d callbacks\n", done, n);
    exit(1);
  }
}

/* An empty Lua function called from C, calls/s over n calls. */
static double pcall_rate(lua_State *L, long n) {
  long i;
  double t0 = bench_now_us();
  for (i = 0; i < n; i++) {
    lua_getglobal(L, "f");
    lua_pcall(L, 0, 0, 0);
  }
  return (double)n / ((bench_now_us() - t0) / 1e6);
}

static lua_State *empty_fn_state(void) {
  lua_State *L = bare_six();
  (void)luaL_dostring(L, "function f() end");
  return L;
}

#define ROUNDS 7

/* ---- 1. cold open ---------------------------------------------------- */

static void group_cold(void) {
  ludo_runtime_t *rt = runtime_new(0, 0);
  ludo_env_t *env = env_load(rt, "examples/echo");
  int n = 150 * g_scale, r, i;
  double *lat = calloc((size_t)n, sizeof *lat);
  double cold[ROUNDS], bare[ROUNDS], six[ROUNDS], t0;
  lua_State *L;
  ludo_env_prewarm(env, 0);
  /* The probe state that read the declaration is the pool's first state:
   * take it, so every open below builds its state. */
  ludo_session_close(open_reset(env));
  if (prewarmed(rt) != 0) {
    fprintf(stderr, "bench: open.cold: the pool is not empty\n");
    exit(1);
  }
  for (i = 0; i < 50; i++) {
    ludo_session_close(open_reset(env));
    lua_close(bare_openlibs());
  }
  for (r = 0; r < ROUNDS; r++) {
    for (i = 0; i < n; i++) {
      t0 = bench_now_us();
      L = bare_openlibs();
      lua_close(L);
      lat[i] = bench_now_us() - t0;
    }
    bare[r] = bench_median(lat, (size_t)n);
    for (i = 0; i < n; i++) {
      ludo_runtime_poll(rt, 0); /* untimed: whatever the loop has */
      t0 = bench_now_us();
      ludo_session_close(open_reset(env));
      lat[i] = bench_now_us() - t0;
    }
    cold[r] = bench_median(lat, (size_t)n);
    for (i = 0; i < n; i++) {
      t0 = bench_now_us();
      L = bare_six();
      lua_close(L);
      lat[i] = bench_now_us() - t0;
    }
    six[r] = bench_median(lat, (size_t)n);
  }
  if (prewarmed(rt) != 0) fprintf(stderr, "bench: open.cold: pool refilled\n");
  emit("open.cold p50 (open+reset+close)", "us", bench_median(cold, ROUNDS),
       "newstate+openlibs+close", bench_median(bare, ROUNDS), T_LE, ON_RATIO,
       4);
  emit("open.cold p50, vs a 6-lib state", "us", bench_median(cold, ROUNDS),
       "newstate+6 libs+close", bench_median(six, ROUNDS), T_NONE, 0, 0);
  free(lat);
  ludo_runtime_free(rt);
}

/* ---- 2. pooled open -------------------------------------------------- */

static void group_pooled(void) {
  ludo_runtime_t *rt = runtime_new(4, 0);
  ludo_env_t *env = env_load(rt, "examples/echo");
  int n = 300 * g_scale, r, i, rc, short_pool = 0;
  double *lat = calloc((size_t)n, sizeof *lat);
  double *lo = calloc((size_t)n, sizeof *lo);
  double *lc = calloc((size_t)n, sizeof *lc);
  double pooled[ROUNDS], full[ROUNDS], bare[ROUNDS], po[ROUNDS], pc[ROUNDS];
  double t0, t1;
  ludo_session_t *s;
  refill(rt, 4);
  for (i = 0; i < 100; i++) {
    ludo_session_close(open_reset(env));
    refill(rt, 4);
  }
  for (r = 0; r < ROUNDS; r++) {
    for (i = 0; i < n; i++) {
      t0 = bench_now_us();
      lua_close(bare_openlibs());
      lat[i] = bench_now_us() - t0;
    }
    bare[r] = bench_median(lat, (size_t)n);
    for (i = 0; i < n; i++) {
      refill(rt, 4); /* untimed: the loop refills the pool */
      if (prewarmed(rt) < 4) short_pool++;
      t0 = bench_now_us();
      if ((rc = ludo_session_open(env, &s)) != 0) die("open", rc);
      t1 = bench_now_us();
      ludo_session_close(s);
      lat[i] = bench_now_us() - t0;
      lo[i] = t1 - t0;
      lc[i] = lat[i] - lo[i];
    }
    pooled[r] = bench_median(lat, (size_t)n);
    po[r] = bench_median(lo, (size_t)n);
    pc[r] = bench_median(lc, (size_t)n);
    /* The whole cycle, the refill on the loop included. */
    for (i = 0; i < n; i++) {
      refill(rt, 4);
      t0 = bench_now_us();
      if ((rc = ludo_session_open(env, &s)) != 0) die("open", rc);
      ludo_session_close(s);
      refill(rt, 4);
      lat[i] = bench_now_us() - t0;
    }
    full[r] = bench_median(lat, (size_t)n);
  }
  if (short_pool)
    fprintf(stderr, "bench: open.pooled: %d opens found the pool short\n",
            short_pool);
  emit("open.pooled p50 (open+close)", "us", bench_median(pooled, ROUNDS),
       "newstate+openlibs+close", bench_median(bare, ROUNDS), T_LE, ON_MEASURED,
       10);
  emit("open.pooled p50, open alone", "us", bench_median(po, ROUNDS),
       "open.pooled p50 (open+close)", bench_median(pooled, ROUNDS), T_NONE, 0,
       0);
  emit("open.pooled p50, close alone", "us", bench_median(pc, ROUNDS),
       "open.pooled p50 (open+close)", bench_median(pooled, ROUNDS), T_NONE, 0,
       0);
  emit("open.pooled p50, refill included", "us", bench_median(full, ROUNDS),
       "newstate+openlibs+close", bench_median(bare, ROUNDS), T_NONE, 0, 0);
  free(lo);
  free(lc);
  free(lat);
  ludo_runtime_free(rt);
}

/* ---- 3. resident memory ---------------------------------------------- */

#define RSS_N 5000
#define RSS_RUNS 3

/* Runs fn in a child process; it writes n doubles to the fd it gets. */
static int in_child(void (*fn)(int fd), double *out, int n) {
  int p[2], status;
  pid_t pid;
  ssize_t got = 0, k;
  if (pipe(p) != 0) return -1;
  pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    close(p[0]);
    fn(p[1]);
    _exit(0);
  }
  close(p[1]);
  while (got < (ssize_t)(n * sizeof *out) &&
         (k = read(p[0], (char *)out + got, n * sizeof *out - got)) > 0)
    got += k;
  close(p[0]);
  waitpid(pid, &status, 0);
  return got == (ssize_t)(n * sizeof *out) && WIFEXITED(status) &&
                 WEXITSTATUS(status) == 0
             ? 0
             : -1;
}

static void put(int fd, const double *v, int n) {
  if (write(fd, v, n * sizeof *v) != (ssize_t)(n * sizeof *v)) _exit(3);
}

/* Bare states: bytes per state, share left after lua_close + trim. */
static void rss_bare(int fd) {
  lua_State **v = calloc(RSS_N, sizeof *v);
  double r0, r1, r2, out[2];
  int i;
  r0 = rss_bytes();
  for (i = 0; i < RSS_N; i++) v[i] = bare_openlibs();
  r1 = rss_bytes();
  for (i = 0; i < RSS_N; i++) lua_close(v[i]);
  malloc_trim(0);
  r2 = rss_bytes();
  out[0] = (r1 - r0) / RSS_N;
  out[1] = (r2 - r0) / (r1 - r0) * 100;
  put(fd, out, 2);
}

/* Echo sessions, each reset once: bytes per session, share left after
 * closing all and a few polls, and the Lua heap per session. */
static void rss_ludo(int fd) {
  ludo_session_t **v = calloc(RSS_N, sizeof *v);
  ludo_runtime_t *rt = runtime_new(4, 0);
  ludo_env_t *env = env_load(rt, "examples/echo");
  ludo_stats_t st0, st1;
  double r0, r1, r2, out[3];
  int i;
  for (i = 0; i < 16; i++) {
    ludo_session_t *s = open_reset(env);
    step_echo(s);
    ludo_session_close(s);
  }
  for (i = 0; i < 5; i++) ludo_runtime_poll(rt, 0);
  refill(rt, 4);
  ludo_runtime_stats(rt, &st0);
  r0 = rss_bytes();
  for (i = 0; i < RSS_N; i++) v[i] = open_reset(env);
  for (i = 0; i < 5; i++) ludo_runtime_poll(rt, 0);
  r1 = rss_bytes();
  ludo_runtime_stats(rt, &st1);
  for (i = 0; i < RSS_N; i++) ludo_session_close(v[i]);
  /* Closed sessions' states are freed from the loop, a slice per pass:
   * poll until the Lua bytes are back where they were (as a host's loop
   * would, in its idle time). */
  for (i = 0; i < 100000; i++) {
    ludo_stats_t st2;
    ludo_runtime_poll(rt, 0);
    ludo_runtime_stats(rt, &st2);
    if (st2.lua_bytes <= st0.lua_bytes) break;
  }
  r2 = rss_bytes();
  out[0] = (r1 - r0) / RSS_N;
  out[1] = (r2 - r0) / (r1 - r0) * 100;
  out[2] = ((double)st1.heap_bytes - (double)st0.heap_bytes) / RSS_N;
  put(fd, out, 3);
  ludo_runtime_free(rt);
}

static void group_rss(void) {
  double bper[RSS_RUNS], bret[RSS_RUNS], lper[RSS_RUNS], lret[RSS_RUNS];
  double lheap[RSS_RUNS], b[2], l[3];
  int r;
  for (r = 0; r < RSS_RUNS; r++) {
    if (in_child(rss_bare, b, 2) != 0 || in_child(rss_ludo, l, 3) != 0) {
      fprintf(stderr, "bench: rss: a measuring child failed\n");
      exit(1);
    }
    bper[r] = b[0] / 1024;
    bret[r] = b[1];
    lper[r] = l[0] / 1024;
    lret[r] = l[1];
    lheap[r] = l[2] / 1024;
  }
  emit("rss.session (5,000 idle echo)", "KB", bench_median(lper, RSS_RUNS),
       "bare state+openlibs", bench_median(bper, RSS_RUNS), T_LE, ON_MEASURED,
       40);
  emit("rss.retained after closing all", "%", bench_median(lret, RSS_RUNS),
       "bare states closed+trim", bench_median(bret, RSS_RUNS), T_LE,
       ON_MEASURED, 10);
  emit("heap.session (ludo stats, no GC)", "KB", bench_median(lheap, RSS_RUNS),
       "rss.session", bench_median(lper, RSS_RUNS), T_NONE, 0, 0);
  /* The previous bench's figure: one idle session's Lua heap after a
   * full GC, against a bare state with the same 6 libraries. */
  {
    ludo_runtime_t *rt = runtime_new(4, 0);
    ludo_env_t *env = env_load(rt, "examples/echo");
    ludo_session_t *s = open_reset(env);
    lua_State *L = bare_six();
    double bare;
    step_echo(s);
    ludo_session_collect(s);
    lua_gc(L, LUA_GCCOLLECT);
    bare = (double)lua_gc(L, LUA_GCCOUNT) * 1024 + lua_gc(L, LUA_GCCOUNTB);
    emit("memory.idle (Lua heap after GC)", "B",
         (double)ludo_session_memory(s), "bare state+6 libs", bare, T_NONE,
         0, 0);
    lua_close(L);
    ludo_runtime_free(rt);
  }
}

/* ---- 4. echo steps/s by session count -------------------------------- */

static double rate_blocking(ludo_session_t **ss, int k, long steps) {
  long i;
  double t0 = bench_now_us();
  for (i = 0; i < steps; i++) step_echo(ss[i % k]);
  return (double)steps / ((bench_now_us() - t0) / 1e6);
}

static double rate_async(ludo_runtime_t *rt, ludo_session_t **ss, int k,
                         long steps) {
  long issued = 0;
  double t0 = bench_now_us();
  while (issued < steps) {
    async_round(rt, ss, k);
    issued += k;
  }
  return (double)issued / ((bench_now_us() - t0) / 1e6);
}

static void echo_batch_cb(size_t i, ludo_session_t *s, int status,
                          const char *data, size_t len, void *ud) {
  (void)i;
  count_cb(s, status, data, len, ud);
}

/* The k sessions stepped together (ludo_session_step_batch), the way a
 * trainer steps many agents per frame. */
static double rate_batch_echo(ludo_session_t **ss, int k, long steps) {
  static const char *acts[4096];
  static size_t lens[4096];
  long issued = 0, done = 0;
  int j, rc;
  double t0;
  for (j = 0; j < k; j++) {
    acts[j] = ECHO;
    lens[j] = ECHO_LEN;
  }
  t0 = bench_now_us();
  while (issued < steps) {
    if ((rc = ludo_session_step_batch(ss, acts, lens, (size_t)k,
                                      echo_batch_cb, &done)) != 0)
      die("step_batch", rc);
    issued += k;
  }
  return (double)issued / ((bench_now_us() - t0) / 1e6);
}

#define SCALE_ROUNDS 5

static void group_scale(void) {
  static const int ks[] = {1, 16, 256, 4096};
  enum { NK = sizeof ks / sizeof ks[0] };
  double blk[NK][SCALE_ROUNDS], asy[NK][SCALE_ROUNDS], bat[NK][SCALE_ROUNDS],
      call[SCALE_ROUNDS];
  double mb[NK], ma[NK], mt[NK];
  ludo_runtime_t *rt = runtime_new(4, 0);
  ludo_env_t *env = env_load(rt, "examples/echo");
  ludo_session_t **ss = calloc(4096, sizeof *ss);
  lua_State *L = empty_fn_state();
  long steps = 49152L * g_scale;
  int i, r;
  char fig[48];
  for (i = 0; i < 4096; i++) ss[i] = open_reset(env);
  for (i = 0; i < 4096; i++) step_echo(ss[i]);
  rate_blocking(ss, 1, 20000);
  rate_async(rt, ss, 256, 20000);
  for (r = 0; r < SCALE_ROUNDS; r++) {
    call[r] = pcall_rate(L, 1000000);
    for (i = 0; i < NK; i++) {
      blk[i][r] = rate_blocking(ss, ks[i], steps);
      asy[i][r] = rate_async(rt, ss, ks[i], steps);
      bat[i][r] = rate_batch_echo(ss, ks[i], steps);
    }
  }
  for (i = 0; i < NK; i++) {
    mb[i] = bench_median(blk[i], SCALE_ROUNDS);
    ma[i] = bench_median(asy[i], SCALE_ROUNDS);
    mt[i] = bench_median(bat[i], SCALE_ROUNDS);
  }
  /* Target at 1 session: 1.4x the 285-320k/s measured before the direct
   * JSON path (issue 7), taken at 300k. */
  emit("step.echo blocking @1", "/s", mb[0], "empty lua_pcall",
       bench_median(call, SCALE_ROUNDS), T_GE, ON_MEASURED, 420000);
  for (i = 1; i < NK; i++) {
    snprintf(fig, sizeof fig, "step.echo blocking @%d", ks[i]);
    emit(fig, "/s", mb[i], "step.echo blocking @1", mb[0],
         ks[i] == 4096 ? T_GE : T_NONE, ON_RATIO, 0.5);
  }
  emit("step.echo async @1", "/s", ma[0], "step.echo blocking @1", mb[0],
       T_NONE, 0, 0);
  for (i = 1; i < NK; i++) {
    snprintf(fig, sizeof fig, "step.echo async @%d", ks[i]);
    emit(fig, "/s", ma[i], "step.echo async @1", ma[0],
         ks[i] == 4096 ? T_GE : T_NONE, ON_RATIO, 0.5);
  }
  /* Batched: against the blocking step at 1 session (a batch of 1 is a
   * blocking step with a callback). */
  for (i = 1; i < NK; i++) {
    snprintf(fig, sizeof fig, "step.echo batch @%d", ks[i]);
    emit(fig, "/s", mt[i], "step.echo blocking @1", mb[0],
         ks[i] == 4096 ? T_GE : T_NONE, ON_RATIO, 0.5);
  }
  lua_close(L);
  ludo_runtime_free(rt);
  free(ss);
}

/* ---- 5. no-op steps -------------------------------------------------- */

static void batch_cb(size_t i, ludo_session_t *s, int status,
                     const char *data, size_t len, void *ud) {
  if (status != 0) {
    fprintf(stderr, "bench: batch step %zu: %s: %.*s\n", i,
            ludo_err_name(status), (int)len, data);
    exit(1);
  }
  ++*(long *)ud;
}

#define BATCH_N 256

static double rate_batch(ludo_session_t **ss, const char **acts,
                         const size_t *lens, long batches) {
  long b, done = 0;
  int rc;
  double t0 = bench_now_us();
  for (b = 0; b < batches; b++)
    if ((rc = ludo_session_step_batch(ss, acts, lens, BATCH_N, batch_cb,
                                      &done)) != 0)
      die("step_batch", rc);
  if (done != batches * BATCH_N) {
    fprintf(stderr, "bench: batch: %ld results\n", done);
    exit(1);
  }
  return (double)(batches * BATCH_N) / ((bench_now_us() - t0) / 1e6);
}

/* The floor of any design with a Lua state per session: 256 bare states
 * (the 6 libraries a session opens), each with a coroutine whose step
 * function returns a new table, resumed round-robin with a new table as
 * the action. No JSON, no budget, no runner: steps/s. */
typedef struct {
  lua_State *L[BATCH_N], *co[BATCH_N];
} floor_t;

static void floor_open(floor_t *f) {
  int i, nr;
  for (i = 0; i < BATCH_N; i++) {
    f->L[i] = bare_six();
    if (luaL_dostring(f->L[i], "local function step(a) return {} end\n"
                      "return function(a) while true do\n"
                      "a = coroutine.yield(step(a)) end end") != LUA_OK)
      die("floor state", -1);
    f->co[i] = lua_newthread(f->L[i]);
    lua_pushvalue(f->L[i], -2);
    lua_xmove(f->L[i], f->co[i], 1);
    lua_createtable(f->co[i], 0, 0);
    if (lua_resume(f->co[i], f->L[i], 1, &nr) != LUA_YIELD)
      die("floor resume", -1);
    lua_pop(f->co[i], nr);
  }
}

static double floor_rate(floor_t *f, long n) {
  long k;
  int nr;
  double t0 = bench_now_us();
  for (k = 0; k < n; k++) {
    lua_State *co = f->co[k % BATCH_N];
    lua_createtable(co, 0, 0);
    if (lua_resume(co, f->L[k % BATCH_N], 1, &nr) != LUA_YIELD)
      die("floor resume", -1);
    lua_pop(co, nr);
  }
  return (double)n / ((bench_now_us() - t0) / 1e6);
}

static void floor_close(floor_t *f) {
  int i;
  for (i = 0; i < BATCH_N; i++) lua_close(f->L[i]);
}

static void group_noop(void) {
  ludo_runtime_t *rt = runtime_new(4, 0);
  ludo_env_t *env = env_load(rt, "bench/envs/noop");
  ludo_session_t *s = open_reset(env), *ss[BATCH_N];
  const char *acts[BATCH_N], *out;
  size_t lens[BATCH_N], len;
  lua_State *L = empty_fn_state();
  double call[ROUNDS], one[ROUNDS], batch[ROUNDS], rr[ROUNDS], fl[ROUNDS],
      t0;
  long n = 300000L * g_scale, i;
  int r, rc;
  floor_t fs;
  floor_open(&fs);
  floor_rate(&fs, 100000);
  for (i = 0; i < BATCH_N; i++) {
    ss[i] = open_reset(env);
    acts[i] = "{}";
    lens[i] = 2;
  }
  pcall_rate(L, 200000);
  rate_batch(ss, acts, lens, 200);
  for (r = 0; r < ROUNDS; r++) {
    call[r] = pcall_rate(L, 2 * n);
    t0 = bench_now_us();
    for (i = 0; i < n; i++)
      if ((rc = ludo_session_step(s, "{}", 2, &out, &len)) != 0)
        die_s(s, "step", rc);
    one[r] = (double)n / ((bench_now_us() - t0) / 1e6);
    batch[r] = rate_batch(ss, acts, lens, n / BATCH_N);
    /* The same 256 sessions stepped one blocking call at a time: what
     * the batch saves (or costs) apart from touching 256 states. */
    t0 = bench_now_us();
    for (i = 0; i < n; i++)
      if ((rc = ludo_session_step(ss[i % BATCH_N], "{}", 2, &out, &len)) !=
          0)
        die_s(ss[i % BATCH_N], "step", rc);
    rr[r] = (double)n / ((bench_now_us() - t0) / 1e6);
    fl[r] = floor_rate(&fs, n);
  }
  floor_close(&fs);
  emit("step.noop blocking", "/s", bench_median(one, ROUNDS), "empty lua_pcall",
       bench_median(call, ROUNDS), T_NONE, 0, 0);
  emit("step.noop batch of 256 (steps/s)", "/s", bench_median(batch, ROUNDS),
       "empty lua_pcall", bench_median(call, ROUNDS), T_GE, ON_MEASURED, 2e6);
  emit("step.noop batch of 256, vs blocking", "/s", bench_median(batch, ROUNDS),
       "blocking, 256 round-robin", bench_median(rr, ROUNDS), T_NONE, 0, 0);
  emit("step.noop batch of 256, vs bare states", "/s",
       bench_median(batch, ROUNDS), "256 bare states, resume+table",
       bench_median(fl, ROUNDS), T_NONE, 0, 0);
  lua_close(L);
  ludo_runtime_free(rt);
}

/* ---- 6. latency ------------------------------------------------------ */

/* Percentile figures are taken per run over a large sample; the table
 * gives the median over LAT_RUNS runs, so one burst of load from another
 * process does not make the figure. */
#define LAT_RUNS 3

static void group_latency(void) {
  ludo_runtime_t *rt = runtime_new(4, 0);
  ludo_env_t *env = env_load(rt, "examples/echo");
  ludo_session_t *s = open_reset(env), *ss[256];
  lua_State *L = empty_fn_state();
  size_t n = 100000 * (size_t)g_scale, m = 2000 * (size_t)g_scale, i;
  double *lat = calloc(n, sizeof *lat), *call = calloc(n, sizeof *call);
  double c50[LAT_RUNS], s50[LAT_RUNS], s99[LAT_RUNS], s999[LAT_RUNS];
  double r50[LAT_RUNS], r99[LAT_RUNS], r999[LAT_RUNS], t0, c0, p50, q50;
  double u50[LAT_RUNS], u999[LAT_RUNS];
  int run;
  for (i = 0; i < 256; i++) ss[i] = open_reset(env);
  for (i = 0; i < 20000; i++) step_echo(s);
  for (i = 0; i < 300; i++) async_round(rt, ss, 256);
  for (run = 0; run < LAT_RUNS; run++) {
    for (i = 0; i < n; i++) {
      t0 = bench_now_us();
      lua_getglobal(L, "f");
      lua_pcall(L, 0, 0, 0);
      call[i] = bench_now_us() - t0;
      t0 = bench_now_us();
      step_echo(s);
      lat[i] = bench_now_us() - t0;
    }
    c50[run] = bench_median(call, n);
    s50[run] = bench_pct(lat, n, 0.5);
    s99[run] = bench_pct(lat, n, 0.99);
    s999[run] = bench_pct(lat, n, 0.999);
    for (i = 0; i < m; i++) {
      t0 = bench_now_us();
      c0 = cpu_us();
      async_round(rt, ss, 256);
      call[i] = cpu_us() - c0;
      lat[i] = bench_now_us() - t0;
    }
    r50[run] = bench_pct(lat, m, 0.5);
    r99[run] = bench_pct(lat, m, 0.99);
    r999[run] = bench_pct(lat, m, 0.999);
    u50[run] = bench_pct(call, m, 0.5);
    u999[run] = bench_pct(call, m, 0.999);
  }
  p50 = bench_median(s50, LAT_RUNS);
  q50 = bench_median(r50, LAT_RUNS);
  emit("latency.step p50", "us", p50, "timed empty lua_pcall",
       bench_median(c50, LAT_RUNS), T_NONE, 0, 0);
  emit("latency.step p99", "us", bench_median(s99, LAT_RUNS),
       "latency.step p50", p50, T_NONE, 0, 0);
  emit("latency.step p99.9", "us", bench_median(s999, LAT_RUNS),
       "latency.step p50", p50, T_NONE, 0, 0);
  emit("latency.round256 p50", "us", q50, "256 x step p50", 256 * p50,
       T_NONE, 0, 0);
  emit("latency.round256 p99", "us", bench_median(r99, LAT_RUNS),
       "latency.round256 p50", q50, T_NONE, 0, 0);
  emit("latency.round256 p99.9", "us", bench_median(r999, LAT_RUNS),
       "latency.round256 p50", q50, T_LE, ON_RATIO, 3);
  emit("latency.round256 p99.9, CPU time", "us", bench_median(u999, LAT_RUNS),
       "its p50, CPU time", bench_median(u50, LAT_RUNS), T_NONE, 0, 0);
  free(lat);
  free(call);
  lua_close(L);
  ludo_runtime_free(rt);
}

/* ---- 7. poll overshoot ----------------------------------------------- */

static void flag_cb(ludo_session_t *s, int status, const char *data,
                    size_t len, void *ud) {
  if (status != 0)
    fprintf(stderr, "bench: spin step: %s: %.*s\n", ludo_err_name(status),
            (int)len, data);
  *(int *)ud = 1;
}

#define POLL_BUDGET_US 1000
#define SPIN_S 1.0
#define POLL_CAP 20000

/* Polls with a 1 ms budget while one session runs a step that spins for
 * about SPIN_S seconds; stores each poll's wall time, returns how many. */
static size_t poll_run(ludo_session_t *s, ludo_runtime_t *rt,
                       const char *action, double *lat) {
  double t0, t_end = bench_now_us() + 5 * SPIN_S * 1e6;
  size_t n = 0;
  int done = 0, rc;
  if ((rc = ludo_session_step_async(s, action, strlen(action), flag_cb,
                                    &done)) != 0)
    die_s(s, "step_async", rc);
  while (!done && n < POLL_CAP && bench_now_us() < t_end) {
    t0 = bench_now_us();
    rc = ludo_runtime_poll(rt, POLL_BUDGET_US);
    lat[n++] = bench_now_us() - t0;
    if (rc < 0) die("poll", rc);
  }
  if (!done) {
    fprintf(stderr, "bench: poll: the spinning step did not end in %.0f s\n",
            5 * SPIN_S);
    exit(1);
  }
  return n;
}

static void group_poll(void) {
  ludo_runtime_t *rt;
  ludo_env_t *env;
  ludo_session_t *s;
  lua_State *L = bare_six();
  double *lat = calloc(POLL_CAP, sizeof *lat), t0, rate;
  double p50[LAT_RUNS], p99[LAT_RUNS], mx[LAT_RUNS];
  size_t n;
  long iters;
  char action[64];
  int run;
  /* Loop turns per second of the spin env's loop, in a plain state. */
  t0 = bench_now_us();
  (void)luaL_dostring(L, "local x = 0 for i = 1, 20000000 do x = x + i end");
  rate = 2e7 / ((bench_now_us() - t0) / 1e6);
  lua_close(L);
  iters = (long)(rate * SPIN_S);
  snprintf(action, sizeof action, "{\"n\":%ld}", iters);
  rt = runtime_new(4, 60000);
  env = env_load(rt, "bench/envs/spin");
  s = open_reset(env);
  for (run = 0; run < LAT_RUNS; run++) {
    n = poll_run(s, rt, action, lat);
    p50[run] = bench_pct(lat, n, 0.5);
    p99[run] = bench_pct(lat, n, 0.99);
    mx[run] = bench_pct(lat, n, 1.0);
  }
  emit("poll.overshoot p50 (budget 1 ms)", "us", bench_median(p50, LAT_RUNS),
       "poll budget", POLL_BUDGET_US, T_NONE, 0, 0);
  emit("poll.overshoot p99", "us", bench_median(p99, LAT_RUNS), "poll budget",
       POLL_BUDGET_US, T_LE, ON_MEASURED, 2000);
  emit("poll.overshoot max", "us", bench_median(mx, LAT_RUNS), "poll budget",
       POLL_BUDGET_US, T_NONE, 0, 0);
  free(lat);
  ludo_runtime_free(rt);
}

/* ---- 8. JSON --------------------------------------------------------- */

static double jansson_rate(long n) {
  long i;
  double t0 = bench_now_us();
  for (i = 0; i < n; i++) {
    json_error_t err;
    json_t *j = json_loadb(ECHO, ECHO_LEN, 0, &err);
    char *txt = json_dumps(j, JSON_COMPACT);
    if (j == NULL || txt == NULL) {
      fprintf(stderr, "bench: jansson failed\n");
      exit(1);
    }
    free(txt);
    json_decref(j);
  }
  return (double)n / ((bench_now_us() - t0) / 1e6);
}

static void group_json(void) {
  ludo_runtime_t *rt = runtime_new(4, 0);
  ludo_env_t *env = env_load(rt, "examples/echo");
  ludo_session_t *s = open_reset(env);
  double js[ROUNDS], step[ROUNDS];
  long n = 200000L * g_scale;
  int r;
  jansson_rate(20000);
  rate_blocking(&s, 1, 20000);
  for (r = 0; r < ROUNDS; r++) {
    js[r] = 1e6 / jansson_rate(n);
    step[r] = 1e6 / rate_blocking(&s, 1, n);
  }
  emit("json.echo step time", "us", bench_median(step, ROUNDS),
       "jansson loadb+dumps", bench_median(js, ROUNDS), T_NONE, 0, 0);
  ludo_runtime_free(rt);
}

/* ---- rubrics (the previous bench's figures) -------------------------- */

static void group_rubrics(void) {
  static const char *const actions[] = {"{\"x\":0.15}", "{\"x\":0.35}",
                                        "{\"x\":0.55}", "{\"x\":0.95}"};
  static const struct {
    const char *env, *fig;
    int episode, base; /* base: index of the row it is compared with */
  } cases[] = {
      {"bench/envs/rubrics/bare.lua", "rubric.bare step", 0, -1},
      {"bench/envs/rubrics/ws3.lua", "rubric.WeightedSum(3 leaves)", 0, 0},
      {"bench/envs/rubrics/seq.lua", "rubric.Sequential(Gate,WS)", 0, 0},
      {"bench/envs/rubrics/bare.lua", "rubric.bare, 100-step episodes",
       100, -1},
      {"bench/envs/rubrics/disc100.lua", "rubric.ExpDiscounting T=100",
       100, 3}};
  enum { NC = sizeof cases / sizeof cases[0], RR = 3 };
  double rate[NC][RR], med[NC], t0;
  ludo_runtime_t *rt = runtime_new(1, 0);
  ludo_session_t *s[NC];
  const char *out;
  size_t len;
  long n = 100000L * g_scale, i;
  int c, r, rc;
  for (c = 0; c < NC; c++) s[c] = open_reset(env_load(rt, cases[c].env));
  for (r = 0; r < RR; r++)
    for (c = 0; c < NC; c++) {
      t0 = bench_now_us();
      for (i = 0; i < n; i++) {
        const char *a = actions[i & 3];
        if (cases[c].episode && i % cases[c].episode == 0)
          ludo_session_reset(s[c], "{}", 2, &out, &len);
        if ((rc = ludo_session_step(s[c], a, strlen(a), &out, &len)) != 0)
          die_s(s[c], "step", rc);
      }
      rate[c][r] = (double)n / ((bench_now_us() - t0) / 1e6);
    }
  for (c = 0; c < NC; c++) med[c] = bench_median(rate[c], RR);
  for (c = 0; c < NC; c++)
    if (cases[c].base < 0)
      emit(cases[c].fig, "/s", med[c], "", NAN, T_NONE, 0, 0);
    else
      emit(cases[c].fig, "/s", med[c], cases[cases[c].base].fig,
           med[cases[c].base], T_NONE, 0, 0);
  ludo_runtime_free(rt);
}

/* ---- the table ------------------------------------------------------- */

static const struct {
  const char *name;
  void (*fn)(void);
} groups[] = {{"cold", group_cold},       {"pooled", group_pooled},
              {"rss", group_rss},         {"scale", group_scale},
              {"noop", group_noop},       {"latency", group_latency},
              {"poll", group_poll},       {"json", group_json},
              {"rubrics", group_rubrics}};

static int write_json(const char *path, const row_t *rows, size_t n,
                      const gstat_t *gs, size_t ng, const char *date,
                      const char *machine, double load) {
  FILE *f = fopen(path, "w");
  size_t i;
  if (f == NULL) return -1;
  fprintf(f, "{\n  \"date\": \"%s\",\n  \"machine\": \"%s\",\n", date,
          machine);
  fprintf(f, "  \"load_before\": %.2f,\n  \"scale\": %d,\n", load, g_scale);
  fprintf(f, "  \"groups\": [\n");
  for (i = 0; i < ng; i++)
    fprintf(f, "    {\"group\": \"%s\", \"wall_s\": %.2f, \"cpu_s\": %.2f, "
               "\"preemptions\": %ld}%s\n",
            gs[i].name, gs[i].wall_s, gs[i].cpu_s, gs[i].nivcsw,
            i + 1 < ng ? "," : "");
  fprintf(f, "  ],\n");
  fprintf(f, "  \"figures\": [\n");
  bench_json_rows(f, rows, n);
  fputs("  ]\n}\n", f);
  return fclose(f);
}

static double tv_s(struct timeval tv) {
  return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* Runs one group in a child process and appends the rows it sends. */
static int run_group(size_t g, row_t **rows, size_t *n, size_t *cap,
                     gstat_t *gs) {
  int p[2], status;
  pid_t pid;
  row_t r;
  struct rusage u0, u1;
  double t0 = bench_now_us();
  memset(gs, 0, sizeof *gs);
  gs->name = groups[g].name;
  fflush(stdout);
  fflush(stderr);
  getrusage(RUSAGE_CHILDREN, &u0);
  if (pipe(p) != 0) return -1;
  if ((pid = fork()) < 0) return -1;
  if (pid == 0) {
    close(p[0]);
    g_rows_fd = p[1];
    groups[g].fn();
    _exit(0);
  }
  close(p[1]);
  while (read(p[0], &r, sizeof r) == (ssize_t)sizeof r) {
    if (*n == *cap) {
      *cap = *cap ? *cap * 2 : 64;
      *rows = realloc(*rows, *cap * sizeof **rows);
    }
    (*rows)[(*n)++] = r;
  }
  close(p[0]);
  waitpid(pid, &status, 0);
  getrusage(RUSAGE_CHILDREN, &u1);
  gs->wall_s = (bench_now_us() - t0) / 1e6;
  gs->cpu_s = tv_s(u1.ru_utime) - tv_s(u0.ru_utime) + tv_s(u1.ru_stime) -
              tv_s(u0.ru_stime);
  gs->nivcsw = u1.ru_nivcsw - u0.ru_nivcsw;
  fprintf(stderr, "bench: %-8s %5.1f s wall, %5.1f s CPU, %ld preemptions\n",
          gs->name, gs->wall_s, gs->cpu_s, gs->nivcsw);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}


int main(int argc, char **argv) {
  const char *json = "build/bench.json", *only = NULL;
  row_t *rows = NULL;
  size_t nrows = 0, cap = 0, g, ng = 0;
  gstat_t gs[sizeof groups / sizeof groups[0]];
  char date[64], machine[512];
  double load = 0;
  time_t now = time(NULL);
  int i, failed = 0;
  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0 && i + 1 < argc)
      json = argv[++i];
    else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
      only = argv[++i];
    else if (atoi(argv[i]) > 0)
      g_scale = atoi(argv[i]);
    else {
      fprintf(stderr,
              "usage: ludo-bench [--json PATH] [--only GROUP,...] [scale]\n"
              "groups:");
      for (g = 0; g < sizeof groups / sizeof groups[0]; g++)
        fprintf(stderr, " %s", groups[g].name);
      fputc('\n', stderr);
      return 2;
    }
  }
  strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
  bench_machine(machine, sizeof machine);
  if (getloadavg(&load, 1) != 1) load = NAN;
  printf("ludo %s bench, %s; %s; load %.2f\n", ludo_version(), date, machine,
         load);
  for (g = 0; g < sizeof groups / sizeof groups[0]; g++) {
    if (only != NULL) {
      const char *p = strstr(only, groups[g].name);
      size_t l = strlen(groups[g].name);
      if (p == NULL || (p != only && p[-1] != ',') ||
          (p[l] != '\0' && p[l] != ','))
        continue;
    }
    if (run_group(g, &rows, &nrows, &cap, &gs[ng++]) != 0) {
      fprintf(stderr, "bench: group %s failed\n", groups[g].name);
      failed = 1;
    }
  }
  bench_print_table(rows, nrows);
  if (write_json(json, rows, nrows, gs, ng, date, machine, load) != 0) {
    fprintf(stderr, "bench: cannot write %s\n", json);
    failed = 1;
  } else {
    printf("(written to %s)\n", json);
  }
  free(rows);
  return failed;
}
