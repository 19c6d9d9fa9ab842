/* core.h - the core object: what every layer above shares for one runtime
 * on one thread. It owns the allocator seam, the log, the event loop (its
 * own, or one the host lends), the CPU watchdog, the compiled-code cache,
 * the registry of C modules, and the run queue that delivers work from the
 * loop.
 *
 * The run queue. Everything ludo does after a call returns (starting a
 * non-blocking call, resuming Lua after a wait or a time slice, running a
 * completion callback, refilling a pool) is a task posted here. A check
 * handle on the loop runs the tasks right after the loop's I/O phase, and
 * an idle handle keeps the loop from blocking while tasks are ready. So a
 * host that runs the loop itself (uv_run) needs nothing else, and a host
 * that polls gets them from ludo__core_poll. A task posted from the I/O
 * phase runs in the pass that follows it: a step a socket's message
 * starts runs, and its reply is written, before the loop waits for I/O
 * again. Tasks posted from a host callback that a pass runs (a
 * completion callback starting the next call) go to the next pass of the
 * loop (or the next poll), so such a chain cannot keep one pass busy
 * forever. A pass stops early at the poll's deadline; what is left runs
 * on the next pass. */
#ifndef LUDO_CORE_CORE_H
#define LUDO_CORE_CORE_H

#include <stdint.h>
#include <uv.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/pages.h"
#include "core/codecache.h"
#include "core/prefault.h"
#include "core/registry.h"
#include "core/watchdog.h"
#include "ludo_defs.h"

typedef struct ludo__task_s ludo__task_t;
typedef void (*ludo__task_fn)(ludo__task_t *t);

/* A unit of work for the run queue, embedded in its owner. */
struct ludo__task_s {
  ludo__task_fn fn;
  ludo__task_t *next;
  int queued;
  int held;   /* a delivery held back by a blocking call, not yet run */
};

typedef struct ludo__queue_s {
  ludo__task_t *head, *tail;
} ludo__queue_t;

/* Something of a layer above that must end before the core closes (a
 * client's connection: its handles are on the loop), embedded in its
 * owner. ludo__core_close calls `fn` of every closer still registered,
 * first: `fn` starts closing its handles (their close callbacks count as
 * usual) and unregisters itself. */
typedef struct ludo__closer_s ludo__closer_t;
struct ludo__closer_s {
  void (*fn)(ludo__closer_t *cl);
  ludo__closer_t *next, *prev;
};

typedef struct ludo__core_s {
  ludo__alloc_t heap;        /* every byte of the runtime goes through it */
  ludo__pages_t pages;       /* the states' arena chunks, when `heap` is
                                the C library's (a host's allocator gets
                                them too); freed with the runtime */
  ludo__prefault_t prefault; /* maps the pages' next region ahead */
  ludo__log_t log;
  uv_loop_t own_loop;
  uv_loop_t *loop;           /* &own_loop, or the host's */
  int borrowed;              /* the loop is the host's */
  struct ludo__core_s *next_borrower; /* the list of cores on hosts' loops
                                (core.c, claim_loop) */
  uv_idle_t idle;            /* active while tasks are ready: the loop
                                then polls for I/O without blocking */
  uv_check_t check;          /* runs the queue, after the I/O phase */
  int closing, handles;
  ludo__queue_t ready;       /* tasks for this pass */
  ludo__queue_t later;       /* tasks posted from host callbacks */
  ludo__queue_t held;        /* deliveries kept while a blocking call runs
                                the loop (ludo__core_post_delivery) */
  int blocking;              /* blocking calls running the loop (depth) */
  int nheld;                 /* tasks with `held` set: held, or posted
                                after the blocking call and not yet run */
  ludo__closer_t *closers;   /* see ludo__closer_t */
  uint64_t deadline_ns;      /* end of the current poll; 0: none */
  uint64_t slice_ns;         /* time slice of Lua runs outside poll; 0 */
  uint64_t pass_end_ns;      /* outside poll, with a slice: when the
                                current queue pass gives the loop back */
  uint64_t last_pass_ns;     /* when the loop last ran the queue */
  int in_callback;           /* inside a host callback (depth) */
  int in_pass;               /* the run queue's pass is running */
  int in_run;                /* inside uv_run started by ludo */
  int lua_depth;             /* Lua runs active on this core (nesting) */
  ludo__watchdog_t watchdog;
  int has_watchdog;          /* CPU budgets by signal (else count hook) */
  ludo__codecache_t cache;
  ludo__registry_t cmods;    /* C modules every session can require */
  char *module_path;         /* owned copy or NULL */
  size_t trim_freed;         /* bytes freed since the last malloc_trim */
  struct ludo__curlm_s *curlm; /* libcurl's multi handle on this loop
                                (net/curlm.c), made on first use; NULL */
  /* Called by the run queue with the next ready task before it runs the
   * current one, so the owner can have the next task's memory brought
   * into the caches while the current runs (env/session.c). NULL: none. */
  void (*hint)(ludo__task_t *next, void *ud);
  void *hint_ud;
  /* Called once the last handle finished closing after ludo__core_close;
   * the owner frees the memory holding `c` there. */
  void (*on_closed)(struct ludo__core_s *c);
} ludo__core_t;

/* A handle of ludo's on the core's loop is counted from init to its close
 * callback, so the core knows when it may go. */
void ludo__core_handle_opened(ludo__core_t *c);
void ludo__core_handle_closed(ludo__core_t *c);

/* Sets up `c`: `loop` NULL for an own loop. Copies module_path. Returns 0,
 * LUDO_EBUSY (`loop` carries another core already, until that one's
 * ludo__core_close) or LUDO_ENOMEM. On failure nothing is left to free. */
int ludo__core_init(ludo__core_t *c, ludo_alloc_fn alloc, void *alloc_ud,
                    ludo_log_cb log, void *log_ud, uv_loop_t *loop,
                    const char *module_path);

/* Closes ludo's handles (with close callbacks) and frees what `c` holds;
 * c->on_closed runs when the last handle has closed. On an own loop that
 * happens before this returns (the loop is run, then closed); on a
 * borrowed loop, in the host's next uv_run. */
void ludo__core_close(ludo__core_t *c);

/* Posts `t` (no-op when already queued). [never fails] */
void ludo__core_post(ludo__core_t *c, ludo__task_t *t);

/* Posts `t` for the next pass of the loop (or the next poll), for work
 * that should not hold the current pass: pool refills. */
void ludo__core_post_later(ludo__core_t *c, ludo__task_t *t);

/* Takes `t` out of the queue (or of the held deliveries) if it is
 * there. */
void ludo__core_unpost(ludo__core_t *c, ludo__task_t *t);

/* Posts `t`, the delivery of a host's completion callback: now, or, while
 * a blocking call runs the loop (ludo__core_block), once the outermost one
 * has returned, so a host callback never runs inside a blocking call.
 * [never fails] */
void ludo__core_post_delivery(ludo__core_t *c, ludo__task_t *t);

/* A blocking call starts running the loop / has returned. When the
 * outermost returns, the held deliveries are posted. */
void ludo__core_block(ludo__core_t *c);
void ludo__core_unblock(ludo__core_t *c);

/* Deliveries a blocking call held back that have not run yet: they were
 * completed calls while it ran, so ludo_runtime_run waits for them. */
int ludo__core_held_pending(const ludo__core_t *c);

/* 1 when a blocking call may run the loop now: not from inside a host
 * function or callback, nor inside the loop (it would re-enter it). */
static inline int ludo__core_may_block(const ludo__core_t *c) {
  return c->in_callback == 0 && c->lua_depth == 0 && c->in_run == 0;
}

/* Registers / unregisters a closer (see ludo__closer_t). */
void ludo__core_add_closer(ludo__core_t *c, ludo__closer_t *cl);
void ludo__core_remove_closer(ludo__core_t *c, ludo__closer_t *cl);

/* Calls every registered closer now (ludo__core_close does, first; the
 * runtime's free does earlier, so the host callbacks closers run, a
 * client's ECANCELED, see every object of the runtime still alive). A
 * closer registered meanwhile is called too. */
void ludo__core_run_closers(ludo__core_t *c);

/* Runs ready work for at most `budget_ns` (0: what is ready now, without
 * a limit). Never blocks. */
void ludo__core_poll(ludo__core_t *c, uint64_t budget_ns);

/* Runs one loop iteration, blocking until something happens when nothing
 * is queued. For blocking calls. */
void ludo__core_run_once(ludo__core_t *c);

/* 1 when the loop ran ludo's queue lately (the host polls or runs the
 * loop); 0 for a host that only makes blocking calls. */
int ludo__core_loop_recent(const ludo__core_t *c);

/* 1 when the current pass is past the poll's deadline. */
int ludo__core_over(const ludo__core_t *c);

/* The deadline a Lua run starting now may use for its time slice (0:
 * none). */
uint64_t ludo__core_slice_deadline(const ludo__core_t *c);

/* Counts freed memory and returns it to the system (malloc_trim) once a
 * few megabytes have been freed, when the allocator is the C library's. */
void ludo__core_note_freed(ludo__core_t *c, size_t bytes);

#endif
