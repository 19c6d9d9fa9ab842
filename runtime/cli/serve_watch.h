/* serve_watch.h - the part of `ludo serve`'s stop that no Lua call can
 * hold up. A thread of its own, with a loop of its own, watches SIGINT
 * and SIGTERM: the first asks the command to stop, any later one is
 * ignored. From the stop on it bounds the stop by the clock, whatever
 * the workers' loops are doing: once the drain is over it has every
 * worker's running Lua interrupted (every 0.2 s, so a call that
 * cannot yield ends, and a call queued before it fails before it
 * starts), and at the deadline it ends the process with status 0. */
#ifndef LUDO_CLI_SERVE_WATCH_H
#define LUDO_CLI_SERVE_WATCH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

typedef struct ludo__cli_watch_s {
  /* Filled in by the caller before ludo__cli_watch_start; both called
   * on the watcher's thread. */
  void (*stop)(void *ud);      /* stop every worker (once) */
  void (*interrupt)(void *ud); /* interrupt every worker's running Lua */
  void *ud;
  uint64_t drain_ms;           /* the drain's length (0: none) */
  uint64_t deadline_ms;        /* the exit's, from the stop */
  /* The watcher's own. */
  pthread_t thread;
  uv_loop_t loop;
  uv_signal_t sigint, sigterm;
  uv_async_t wake;             /* a stop or the end was asked */
  uv_timer_t interrupts, deadline;
  atomic_int stop_asked, end_asked;
  int stopping, started;
} ludo__cli_watch_t;

/* Starts the watcher's thread: from now on SIGINT and SIGTERM are its.
 * Returns 0, or -1 after printing why. */
int ludo__cli_watch_start(ludo__cli_watch_t *w);

/* Asks for the stop a signal would start, without the "stopping" line
 * (a start-up that failed). Any thread. */
void ludo__cli_watch_stop(ludo__cli_watch_t *w);

/* Ends the watcher and waits for its thread; SIGINT and SIGTERM are
 * ignored from then on (the command is about to return). After a
 * ludo__cli_watch_start that returned 0. */
void ludo__cli_watch_end(ludo__cli_watch_t *w);

#endif
