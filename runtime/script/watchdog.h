/* watchdog.h - enforces CPU budgets without slowing Lua down.
 *
 * A count hook makes the VM trace every instruction (about 10% of a step).
 * Instead, while a call runs, its state registers a deadline here; a
 * watchdog thread polls (every budget/4, at most 50 ms) and, when a call
 * overruns, sends SIGURG to the runtime's thread. The signal handler, on
 * that thread, arms a count hook on every coroutine the call is running
 * through (as lua.c does on SIGINT), and the hook raises ETIMEOUT on the
 * next instruction, again and again, so pcall cannot swallow it.
 *
 * The handler is installed once per process, only when SIGURG has no
 * handler of the host's; otherwise states fall back to a permanent count
 * hook. SIGURG's default action is to be ignored, so a stray one is
 * harmless. */
#ifndef LUDO_SCRIPT_WATCHDOG_H
#define LUDO_SCRIPT_WATCHDOG_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

struct ludo__state_s;

typedef struct ludo__watchdog_s {
  pthread_t thread;               /* the watchdog */
  pthread_t target;               /* the runtime's thread */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int started, stop;
  _Atomic(struct ludo__state_s *) current; /* state running a call */
  _Atomic uint64_t deadline_ns;   /* of the current stretch (coarse clock) */
  _Atomic uint64_t period_ns;     /* polling period */
} ludo__watchdog_t;

/* Prepares a watchdog for the calling thread (the runtime's). Returns 0,
 * or -1 when signals cannot be used (the host handles SIGURG): states then
 * use a count hook. The thread starts on first use. */
int ludo__watchdog_init(ludo__watchdog_t *w);

/* Stops the thread. */
void ludo__watchdog_free(ludo__watchdog_t *w);

/* A stretch of Lua running for `st` begins / ends. */
void ludo__watchdog_enter(ludo__watchdog_t *w, struct ludo__state_s *st,
                          uint64_t deadline_ns, uint64_t budget_ns);
void ludo__watchdog_leave(ludo__watchdog_t *w);

#endif
