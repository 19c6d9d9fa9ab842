/* sched.h - runs calls (reset/step/state/...) as coroutines of a session
 * state on a libuv loop.
 *
 * A call runs in the state's call thread. When Lua code waits (ludo.sleep,
 * later HTTP, sandbox exec, LLM calls) it yields (ludo.async.PENDING, ops)
 * through ludo.async.await; the call is then "waiting" and resumes from a
 * loop callback when one of its operations completes. A waiting primitive is
 * written in C with ludo__op_new() and ludo__op_complete(); see core.c for
 * ludo.sleep, the first one. */
#ifndef LUDO_SCRIPT_SCHED_H
#define LUDO_SCRIPT_SCHED_H

#include <lua.h>
#include <stddef.h>
#include <uv.h>

#include "script/state.h"

typedef struct ludo__op_s ludo__op_t;
typedef struct ludo__sched_s ludo__sched_t;

/* Called once when a call ends. status 0: the results are on `co`
 * (lua_gettop(co) values); otherwise a LUDO_E* code with the message string
 * on top of `co`. The call's budget is still armed: C work on the results
 * done between ludo__state_run_begin/end (encoding) is bounded by it. The callback must not resume `co`; the scheduler clears
 * the thread after it returns. */
typedef void (*ludo__sched_done_cb)(ludo__sched_t *s, int status,
                                    lua_State *co, void *ud);

/* Cancels a primitive's pending work (e.g. stops a timer). It must arrange
 * for ludo__op_free() to be called eventually (possibly from a close cb). */
typedef void (*ludo__op_cancel_fn)(ludo__op_t *op);

struct ludo__op_s {
  ludo__sched_t *sched;   /* NULL once detached (cancelled or completed) */
  ludo__op_t *next, *prev;
  int ref;                /* registry ref of the Lua handle */
  ludo__op_cancel_fn cancel;
  ludo__alloc_t *heap;    /* where the op was allocated */
  ludo__core_t *core;     /* the state's core (counts loop handles); may
                             be NULL */
  void *data;             /* primitive's own data */
  size_t size;            /* allocation size of this op (with extra) */
};

/* Told that a waiting or sliced call can go on: the owner arranges for
 * ludo__sched_continue to be called from the loop. */
typedef void (*ludo__sched_wake_cb)(ludo__sched_t *s, void *ud);

struct ludo__sched_s {
  /* What every call reads and writes first (two cache lines; see
   * ludo__state_t). */
  ludo__state_t *st;
  lua_State *co;          /* the call thread */
  int co_ref;
  int pending_ref;        /* ref of ludo.async.PENDING */
  int backlog_ref;        /* completions not yet handed to the call */
  int in_call;            /* a call is in flight */
  int waiting;            /* ...and waits on operations */
  int runnable;           /* ...and can go on (ludo__sched_continue) */
  int nargs;              /* values waiting on co for the next resume */
  int sliceable;          /* this call may be time-sliced */
  int resuming;           /* inside lua_resume (re-entrancy guard) */
  int nops;               /* pending operations (in `ops`) */
  const char *input;      /* current call's input bytes (borrowed) */
  size_t input_len;
  uint64_t budget_ns, max_instr;
  uint64_t wall_ns;       /* wall-clock limit of a call; 0 = none */
  uint64_t wall_end_ns;   /* when the current call must be over */
  uv_timer_t *wall;       /* fires at wall_end_ns while the call waits */
  ludo__sched_done_cb done;
  void *done_ud;

  ludo__sched_wake_cb wake;
  void *wake_ud;
  ludo__op_t ops;         /* list head of pending operations */
};

/* Pending operations one call may hold at once. */
#define LUDO__OPS_MAX 1024

/* Sets up the call thread of st (requires "ludo.async"). Returns 0,
 * LUDO_ENOMEM or LUDO_ELOAD. */
int ludo__sched_init(ludo__sched_t *s, ludo__state_t *st);

/* Cancels pending operations; the state itself is closed by its owner. */
void ludo__sched_close(ludo__sched_t *s);

/* Starts a call: pushes the function referenced by `fnref` and the integer
 * `arg` onto the call thread and resumes it. `input` is borrowed until the
 * call ends (copy it first for non-blocking calls). `done` runs exactly once:
 * possibly before this returns. Returns 0, or LUDO_EBUSY when a call is in
 * flight, or LUDO_ENOMEM when no call thread can be made (done is then
 * never called). */
int ludo__sched_start(ludo__sched_t *s, int fnref, lua_Integer arg,
                      const char *input, size_t input_len,
                      ludo__sched_done_cb done, void *ud);

/* Ends a waiting call with LUDO_ECANCELED (done runs). */
void ludo__sched_cancel(ludo__sched_t *s);

/* Resumes a runnable call (one whose wake callback ran). No-op
 * otherwise. */
void ludo__sched_continue(ludo__sched_t *s);

/* Creates an operation for the running call and pushes its Lua handle.
 * `extra` bytes follow the struct for the primitive (op->data points
 * there). Raises when no call can wait here. [-0, +1, e] */
ludo__op_t *ludo__op_new(lua_State *L, size_t extra, ludo__op_cancel_fn c);

/* Completes an operation from a loop callback: `push` (may be NULL)
 * pushes the results onto the given thread and returns how many; they are
 * handed to the call when it next runs (the wake callback tells the owner).
 * Safe after the call was cancelled (does nothing then). The op's memory
 * is the primitive's to free (ludo__op_free). */
void ludo__op_complete(ludo__op_t *op, int (*push)(lua_State *co, void *ud),
                       void *ud);

/* Releases an op's memory (after cancellation finished). */
void ludo__op_free(ludo__op_t *op);

#endif
