/* watchdog.h - CPU budgets and time slices without slowing Lua down.
 *
 * A count hook makes the VM trace every instruction (about 10% of a step).
 * Instead, while Lua runs, its owner enters an entry here with a deadline
 * (the end of its CPU budget, and the end of its time slice when the host
 * bounds its time in ludo); a watchdog thread sleeps until the earliest
 * deadline and, when one passes, sends SIGURG to the runtime's thread. The
 * signal handler, on that thread, calls the `interrupt` function of every
 * entry concerned (async-signal-safe: it arms a count hook, as lua.c does on
 * SIGINT), and the hook raises or yields on the next instruction.
 *
 * Entries nest: Lua of one call may run a host function that runs Lua of
 * another call (a session built from inside a host function). Each entry
 * keeps its own deadlines, an inner entry never changes an outer one, and
 * when an outer budget ends every entry inside it is interrupted as well.
 *
 * The handler is installed once per process, only when SIGURG has no
 * handler of the host's; otherwise owners fall back to a count hook.
 * SIGURG's default action is to be ignored, so a stray one is harmless. */
#ifndef LUDO_CORE_WATCHDOG_H
#define LUDO_CORE_WATCHDOG_H

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>

/* How deeply Lua runs may nest on one thread. */
#define LUDO__WD_DEPTH 16

/* Why an entry is interrupted. CANCEL: ludo_runtime_interrupt (every
 * entry's interrupt gets it at each SIGURG; an owner acts when
 * `cancel_gen` moved since its call was issued). KILL: its budget ended;
 * KILL_OUTER: the budget of an entry it runs inside ended, not its own. */
enum { LUDO__WD_KILL = 1, LUDO__WD_SLICE = 2, LUDO__WD_CANCEL = 3,
       LUDO__WD_KILL_OUTER = 4 };

typedef struct ludo__wd_entry_s {
  uint64_t budget_ns;  /* end of the CPU budget (ludo__clock_ns); 0: none */
  uint64_t slice_ns;   /* end of the time slice; 0: none */
  /* Called from the signal handler on the runtime's thread. */
  void (*interrupt)(void *arg, int why);
  void *arg;
  struct ludo__wd_entry_s *outer; /* the entry this one runs inside */
  struct ludo__watchdog_s *w;
  int slot;
} ludo__wd_entry_t;

typedef struct ludo__watchdog_s {
  pthread_t thread;               /* the watchdog */
  pthread_t target;               /* the runtime's thread */
  sem_t wake;
  int started, ok;
  _Atomic int stop;               /* set by ludo__watchdog_free */
  _Atomic int depth;              /* entries active */
  _Atomic uint64_t deadline[LUDO__WD_DEPTH]; /* earliest of each entry */
  _Atomic uint64_t next_wake;     /* when the thread wakes next */
  _Atomic unsigned cancel_gen;    /* bumped by ludo__watchdog_cancel */
  uint64_t max_sleep_ns;          /* the longest the thread sleeps */
} ludo__watchdog_t;

/* Prepares a watchdog for the calling thread (the runtime's). Returns 0,
 * or -1 when signals cannot be used (the host handles SIGURG): owners then
 * use a count hook. The thread starts on first use. */
int ludo__watchdog_init(ludo__watchdog_t *w);

/* Stops the thread. */
void ludo__watchdog_free(ludo__watchdog_t *w);

/* Every Lua run will have a slice of `slice_ns`: the thread then wakes
 * at least that often, so entering a run finds it due before the slice
 * ends and needs no wake-up of its own (one sem_post per call
 * otherwise). Before the first run. */
void ludo__watchdog_set_slice(ludo__watchdog_t *w, uint64_t slice_ns);

/* ludo_runtime_interrupt: bumps cancel_gen and, with signals, sends
 * SIGURG to the runtime's thread (whose handler hands LUDO__WD_CANCEL to
 * every entry); without them, owners' count hooks see the generation
 * move. Owners stop the calls issued before the bump (script/state.c).
 * Async-signal-safe; callable from any thread. */
void ludo__watchdog_cancel(ludo__watchdog_t *w);

/* Lua begins to run under `e` (deadlines, interrupt and arg filled in by
 * the caller). Returns 0, or -1 when runs nest deeper than LUDO__WD_DEPTH
 * (nothing entered). */
int ludo__watchdog_enter(ludo__watchdog_t *w, ludo__wd_entry_t *e);

/* The run under `e`, the innermost entry, ends. */
void ludo__watchdog_leave(ludo__wd_entry_t *e);

#endif
