/* env.h - environments and sessions: the runtime object, environment
 * modules loaded from folders, pools of pre-warmed session states, and
 * session calls (reset/step/state) with their JSON results. */
#ifndef LUDO_ENV_ENV_H
#define LUDO_ENV_ENV_H

#include <uv.h>

#include "base/buf.h"
#include "base/uuid.h"
#include "core/core.h"
#include "ludo_defs.h"
#include "script/modules.h"
#include "script/sched.h"
#include "script/state.h"

/* The bytes of a failed call's message that a session or script keeps
 * for the host (ludo_session_errmsg): the message lives in the state's
 * memory, under its cap, but the copy is the runtime's (ludo.h). */
#define LUDO__ERRMSG_MAX 16384

/* Call kinds, as ludo.runner numbers them. */
enum { LUDO__CALL_RESET = 1, LUDO__CALL_STEP, LUDO__CALL_STATE,
       LUDO__CALL_CLOSE, LUDO__CALL_TOOL, LUDO__CALL_TASKS };

/* Past this many bytes in the runtime's Lua states, sessions stepped in
 * turn no longer find their lines in the caches: then the memory of the
 * next sessions is asked for while the current one steps. Below it the
 * lines come from the caches anyway and asking costs more than it saves:
 * with echo sessions (40 KB each), asking made 256 of them (10 MiB) 0.8x
 * as fast and 512 (20 MiB) 1.27x (docs/performance.md, "Session 28"). */
#define LUDO__PREFETCH_LIVE ((size_t)16 << 20)

/* How many of a session's first steps taken cold learn which lines of
 * its state a step touches (one phase of its lines each: script/arena.h),
 * and how many cold steps apart later ones come, each learning one phase
 * anew (runtime/env/session.c, learning; docs/performance.md, "Session
 * 32" and "Session 33"). A learning step costs ~25 us more than a step
 * taken cold with its lines asked for ahead. */
#define LUDO__LEARN_STEPS LUDO__ARENA_PHASES
#define LUDO__RELEARN_STEPS 2048u

/* A prepared session state: sandboxed state + scheduler + runner. The
 * order matters to the prefetch of a step (session.c, stage_ranges): what
 * a call reads is the state's first fields, then, adjacent, the end of the
 * state (its arena's record), the references below and the scheduler's
 * first fields. */
typedef struct ludo__pstate_s {
  ludo__state_t st;
  int dispatch_ref;
  int step_ref;                /* ludo.runner's step: a step skips dispatch */
  int named_ref;               /* the rubric's {name, rubric} pairs */
  int encode_ref;              /* the result encoder closure */
  int doing_ref;               /* ludo.runner's `doing`: what a call runs */
  size_t gc_base;              /* the Lua heap (st.used without the result
                                  buffer) after its last collection at a
                                  call's end (session.c, settle_memory) */
  unsigned cold_steps;         /* steps taken cold since it last learned
                                  (session.c, learning) */
  int pause;                   /* the collector's pause (%) once built */
  struct ludo__pstate_s *next;
  ludo__sched_t sched;
} ludo__pstate_t;

/* Session call phases: what the session's task does when it runs. */
enum { LUDO__PH_IDLE = 0, LUDO__PH_START, LUDO__PH_RUN, LUDO__PH_DELIVER };

struct ludo_runtime_s {
  ludo__core_t core;           /* loop, allocator, log, watchdog, caches */
  ludo_options_t opts;
  struct ludo__schema_s *reset_schema; /* reset options, shared */
  ludo_env_t *envs;
  ludo_session_t *sessions;    /* all open sessions */
  ludo_script_t *scripts;      /* all open scripts */
  size_t lua_live;             /* bytes in session and pool states */
  size_t prefetch_live;        /* lua_live past which a step's memory is
                                  asked for ahead (session.c, prefetch):
                                  LUDO__PREFETCH_LIVE */
  uint64_t starts;             /* calls started, ever (session.c, cold) */
  ludo_session_t *last_blocking; /* the session of the last blocking call
                                  (session.c, learn) */
  unsigned nsessions, calls;
  int freeing;                 /* ludo_runtime_free runs: nothing new */
  unsigned gc_seed;            /* spreads the states' GC pacing and
                                  relearning (pstate.c) */
  ludo__pstate_t *retired;     /* states of closed sessions, to free */
  ludo__task_t reclaim;        /* frees them from the loop */
  struct ludo__hostmod_s *hostmods; /* ludo_runtime_add_module copies */
  char errmsg[2048];
};

struct ludo_env_s {
  ludo_runtime_t *rt;
  ludo_env_t *next;
  char *file;                  /* module file (owned) */
  char *name;                  /* default name: folder or file name */
  ludo__modules_t modules;
  ludo__registry_t host;       /* the host modules given at load */
  ludo_host_module_t *hostv;   /* owned copy of the modules array */
  size_t nhostv;
  ludo__buf_t info;            /* JSON description */
  struct ludo__schema_s *action_schema; /* compiled, shared; may be NULL */
  struct ludo__schema_s *obs_schema;    /* the observation's, for strict
                                           sessions; set at load */
  int obs_declared;            /* the module declares `observation` (else
                                  obs_schema is any object's) */
  char *label;                 /* the declared name (mod.name, else
                                  `name`), for messages (owned) */
  struct ludo__tool_s *tools;  /* MCP tools: names and argument schemas */
  size_t ntools;
  ludo__buf_t tools_json;      /* their list, as list_tools shows it */
  int has_tasks;               /* declares `tasks` (its sessions load
                                  ludo.tasks when they need it) */
  int concurrent;
  unsigned nsessions;
  unsigned nservers;           /* servers using it (ludo_env_free waits) */
  ludo__pstate_t *pool;        /* ready states */
  unsigned npool, target;
  ludo__task_t refill;         /* builds one state per loop pass */
  unsigned opening;            /* asynchronous opens not yet run */
  void *opens;                 /* their requests (session.c) */
};

struct ludo_session_s {
  /* What a call reads and writes comes first, in as few cache lines as
   * it fits: with thousands of sessions each is a miss per step
   * (docs/performance.md, "Session 36"). */
  ludo_env_t *env;
  ludo__pstate_t *ps;
  ludo__buf_t out;             /* last result JSON */
  ludo__buf_t in;              /* input copy of a non-blocking call */
  const char *input;           /* the call's input: s->in.p, or the
                                  caller's bytes for a blocking call */
  size_t input_len;
  struct ludo__batch_s *batch; /* the batch this call belongs to */
  size_t batch_index;
  int held;                    /* a blocking call or batch uses it: a
                                  close is deferred until it returns */
  int kind, status, done;
  int strict;                  /* check observations (set_strict) */
  int nest_metadata;           /* results in OpenEnv's wire form: the
                                  metadata in the observation too */
  int closing;                 /* no new calls; teardown under way */
  int close_requested;         /* close asked from inside its own Lua */
  int phase;                   /* LUDO__PH_*: what `task` does next */
  int close_owed;              /* a close_async counts as a call in
                                  flight until its teardown (its `cb`
                                  may be NULL) */
  uint64_t call_wall_ns;       /* the next call's wall-clock limit when
                                  shorter than the runtime's (ludo serve's
                                  timeout_s); 0: the runtime's. The call's
                                  start takes it (session.c) */
  ludo_call_cb cb;
  void *cb_ud;
  ludo__task_t task;           /* a loop-driven call's turn on the loop */
  uint64_t started_at;         /* rt->starts when its last call started
                                  (session.c, cold) */
  ludo_session_t *after, *before; /* learned order of blocking calls: the
                                  session called after this one, last time
                                  (after->before == this; session.c, learn) */

  char id[LUDO__UUID_LEN + 1];
  void *data;
  ludo__buf_t err;             /* last error message */
  int err_code;                /* ...its code, */
  const char *err_call;        /* call ("step"), */
  const char *err_phase;       /* phase ("rubric"; static strings) */
  char err_where[LUDO__WHERE_MAX]; /* and where a limit stopped it */
  ludo_close_cb close_cb;
  void *close_ud;
  ludo_session_t *next, *prev;
};

/* Calls fn(p, n, ud) for each range of memory the runtime asks for ahead
 * of a step of `s` (session.c, prefetch): for tools that measure what it
 * covers (bench/step_count.c). */
void ludo__session_ranges(const ludo_session_t *s, ludo__range_fn fn,
                          void *ud);

/* Builds a prepared state for env. On failure writes rt->errmsg. */
int ludo__env_build(ludo_env_t *env, ludo__pstate_t **out);

/* Appends the JSON text of the value at idx to `b` (the runtime's memory),
 * encoding it first in L's state under its memory cap and CPU budget: a
 * module's declaration kept by the runtime is bounded as the module's own
 * values are. [-0, +0, e] */
void ludo__env_keep_json(lua_State *L, int idx, ludo__buf_t *b);

/* Compiles the schema text on top of L's stack (a module's declaration,
 * in the probe state's load) into *out, within the load's CPU budget and
 * with at most the state's memory cap of compiled schema; pops the text.
 * Raises ELOAD "<what>: EPARSE: schema: ..." naming `what` (ENOMEM past
 * the cap), and the load's timeout when its budget ran out. [-1, +0, e] */
void ludo__env_compile_schema(lua_State *L, ludo_env_t *env,
                              const char *what, struct ludo__schema_s **out);

/* Prepared states (pstate.c): a sandboxed state with its scheduler and the
 * runtime's limits. On failure writes rt->errmsg. */
int ludo__pstate_new(ludo_runtime_t *rt, ludo__modules_t *modules,
                     const char *who, ludo__pstate_t **out);
/* Gives the state of `ps` its own collector pause (ps->pause; its build
 * ran with pstate.c's BUILD_PAUSE), collects it fully (L: its running
 * thread), then moves the start of its next collection cycle a random
 * part of the way towards now, without collecting, so that states built
 * together do not collect together. */
void ludo__pstate_collect(ludo_runtime_t *rt, ludo__pstate_t *ps,
                          lua_State *L);

/* Runs fn(ud) protected in the state under the CPU budget. Failures other
 * than ENOMEM/ETIMEOUT/EBUSY become the code named `as` ("ELOAD"); the
 * message goes to rt->errmsg. */
int ludo__pstate_run(ludo_runtime_t *rt, ludo__pstate_t *ps,
                     lua_CFunction fn, void *ud, const char *as);
void ludo__pstate_free(ludo_runtime_t *rt, ludo__pstate_t *ps);
/* Frees the state of a closed session off the caller's path: from the
 * loop, a few per pass; at once when no loop pass ran lately (a host that
 * only makes blocking calls). */
void ludo__pstate_retire(ludo_runtime_t *rt, ludo__pstate_t *ps);
/* Frees every retired state now (shutdown). */
void ludo__pstate_reclaim_all(ludo_runtime_t *rt);

/* Environment lifecycle (env.c). */
int ludo__env_load(ludo_runtime_t *rt, const char *path,
                   const ludo_env_options_t *opts, ludo_env_t **out);
void ludo__env_destroy(ludo_env_t *env);
void ludo__env_want_refill(ludo_env_t *env);
/* Takes a ready state from the pool, or builds one. */
int ludo__env_acquire(ludo_env_t *env, ludo__pstate_t **out);
/* Makes sure n states wait in the pool, building them now. */
int ludo__env_prewarm(ludo_env_t *env, unsigned n);
/* Builds one pool state now when the pool is short and no loop pass
 * refilled it lately (hosts that only make blocking calls). */
void ludo__env_refill_blocking(ludo_env_t *env);

/* Opens a host module (a ludo_host_module_t given as the loader's
 * upvalue): a table of its functions, each with the module's `ud` as
 * first upvalue. Used by both registries, the environment's and the
 * runtime's. [-0, +1, m] */
int ludo__env_host_module_open(lua_State *L);

/* Sessions (session.c). */
int ludo__session_open(ludo_env_t *env, ludo_session_t **out);
int ludo__session_open_async(ludo_env_t *env, ludo_open_cb cb, void *ud);
void ludo__session_close(ludo_session_t *s);
/* Tears a session down now, whatever it is doing (runtime shutdown). */
void ludo__session_destroy(ludo_session_t *s);
/* ludo_runtime_free, before anything is freed: runs the callbacks `s`
 * owes now (its non-blocking call's, ECANCELED or its outcome; a closing
 * session's teardown with its close callback), the session staying open
 * otherwise. */
void ludo__session_cancel(ludo_session_t *s);
/* 1 when a call of `s` is queued, running, waiting or owes its callback,
 * or `s` waits for its turn in a blocking batch: a new call gets
 * LUDO_EBUSY. */
int ludo__session_busy(const ludo_session_t *s);
/* Completes pending asynchronous opens with ECANCELED. */
void ludo__session_cancel_opens(ludo_env_t *env);
int ludo__session_close_async(ludo_session_t *s, ludo_close_cb cb,
                              void *ud);
/* Steps n sessions (session.c): blocking (cb runs for each, in order,
 * before it returns) or not (cb runs from the loop as each completes). */
int ludo__session_step_batch(ludo_session_t *const *ss,
                             const char *const *actions, const size_t *lens,
                             size_t n, ludo_batch_cb cb, void *ud,
                             int blocking);
/* The core's hint (ludo__core_t.hint, `ud` the runtime): when `next` is
 * a session's task and the runtime's sessions no longer fit in the
 * caches, has its memory brought in while the current task runs. */
void ludo__session_hint(ludo__task_t *next, void *ud);
int ludo__session_call(ludo_session_t *s, int kind, const char *json,
                       size_t len, ludo_call_cb cb, void *ud,
                       const char **out, size_t *out_len);
/* Pushes the closure that writes a call's result JSON (result.c).
 * [-0, +1, m] */
void ludo__result_push_encoder(lua_State *L);
/* Gives the encoder closure at `encoder` the state's rubric list, the
 * {keys, objs, pairs} table at `named` (env.c, prepare_named), once the
 * runner is loaded: the rubric tree no longer changes, and a step then
 * reads the keys from a C array. [-0, +0, m] */
void ludo__result_bind_rubrics(lua_State *L, int encoder, int named);

/* tools.c. In the probe state: compiles the argument schemas of the tools
 * described in the envinfo table at `info` into env->tools and keeps their
 * list as JSON; nothing when there are none. Raises ELOAD on a schema that
 * does not compile. [-0, +0, e] */
void ludo__tools_describe(lua_State *L, ludo_env_t *env, int info);
/* Pushes what a session state's runner needs: nil without tools, else a
 * loader returning, when first called, a table tool name -> argument
 * validator, the list's JSON text and the ludo.tools module (loaded into
 * the state only then). The env must outlive the state. [-0, +1, m] */
void ludo__tools_push(lua_State *L, ludo_env_t *env);
/* Frees env->tools and the list. */
void ludo__tools_free(ludo_env_t *env);
/* 1 when a blocking call may run now: not from inside a host function or
 * callback, nor inside the loop (it would re-enter it). The one place the
 * re-entrancy rule is decided. */
static inline int ludo__runtime_may_block(const ludo_runtime_t *rt) {
  return ludo__core_may_block(&rt->core);
}

/* 1 when ludo_runtime_free may free rt now: not from inside a host
 * function, a callback, the loop, a blocking call (a host handle's
 * callback it runs on a borrowed loop) or ludo_runtime_free itself. */
int ludo__runtime_may_free(const ludo_runtime_t *rt);

/* Scripts (script.c). */
int ludo__script_open(ludo_runtime_t *rt, const char *module,
                      const char *dir, ludo_script_t **out);
int ludo__script_call(ludo_script_t *sc, const char *fn, const char *json,
                      size_t len, const char **out, size_t *out_len);
int ludo__script_call_async(ludo_script_t *sc, const char *fn,
                            const char *json, size_t len, ludo_script_cb cb,
                            void *ud);
const char *ludo__script_errmsg(const ludo_script_t *sc);
void ludo__script_error(const ludo_script_t *sc, ludo_error_t *e);
/* The script's Lua state (its counters, limits). */
const ludo__state_t *ludo__script_state(const ludo_script_t *sc);

/* llmusage.c: what a session's or script's Lua spent on ludo.llm calls. */
void ludo__session_llm_usage(const ludo_session_t *s, ludo_llm_usage_t *out);
void ludo__script_llm_usage(const ludo_script_t *sc, ludo_llm_usage_t *out);
/* The parts of the session's last failure (session.c). */
void ludo__session_error(const ludo_session_t *s, ludo_error_t *e);
/* ludo_script_free: a no-op from a callback ludo_runtime_free runs (it
 * frees the script itself afterwards). */
void ludo__script_free(ludo_script_t *sc);
/* Frees the script now (ludo_runtime_free). */
void ludo__script_destroy(ludo_script_t *sc);
/* ludo_runtime_free, before anything is freed: the non-blocking call in
 * flight of every script of `rt` ends and its callback runs (ECANCELED,
 * or its outcome). */
void ludo__script_cancel_all(ludo_runtime_t *rt);

/* The runtime (runtime.c). */
int ludo__runtime_new(ludo_runtime_t **out, const ludo_options_t *opts);
void ludo__runtime_free(ludo_runtime_t *rt);
int ludo__runtime_poll(ludo_runtime_t *rt, uint32_t budget_us);
int ludo__runtime_run(ludo_runtime_t *rt);
/* ludo_runtime_interrupt: async-signal-safe. */
void ludo__runtime_interrupt(ludo_runtime_t *rt);
void ludo__runtime_stats(ludo_runtime_t *rt, ludo_stats_t *st);
/* Host modules of the whole runtime (hostmod.c): copies `m` into the
 * runtime's registry (ludo_runtime_add_module); frees the copies. */
/* 0 when host module m may be registered in r (a name, not "ludo" nor
 * "ludo.*", not there yet; a function list); else LUDO_EINVAL with the
 * runtime's message (`where`: "runtime" or "environment"). */
int ludo__hostmod_check(ludo_runtime_t *rt, const ludo__registry_t *r,
                        const ludo_host_module_t *m, const char *where);
int ludo__runtime_add_module(ludo_runtime_t *rt,
                             const ludo_host_module_t *m);
void ludo__runtime_free_hostmods(ludo_runtime_t *rt);

/* Formats rt->errmsg. */
void ludo__runtime_seterr(ludo_runtime_t *rt, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
