/* session.c - sessions: open/close, calls and their JSON results. */
#include "env/env.h"

#include <lauxlib.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/cacheprobe.h"
#include "base/errors.h"
#include "base/prefetch.h"
#include "script/json.h"

/* CPU budget of an environment's close(): cleanup gets a small one. */
#define CLOSE_BUDGET_NS LUDO__CLEANUP_BUDGET_NS

/* The calls by kind (LUDO__CALL_*), as errors name them. */
static const char *call_name(int kind) {
  static const char *const names[] = {"?",     "reset", "step",     "state",
                                      "close", "tool call", "tasks"};
  return kind >= 1 && kind <= 6 ? names[kind] : "?";
}

/* Records the failure of a call of `kind`: its code and message; the
 * phase is the call's until on_done knows better. */
static void set_err(ludo_session_t *s, int kind, int code, const char *msg,
                    size_t len) {
  ludo__buf_reset(&s->err);
  if (ludo__buf_add_clipped(&s->err, msg, len, LUDO__ERRMSG_MAX))
    ludo__buf_reset(&s->err);
  s->err_code = code;
  s->err_call = s->err_phase = call_name(kind);
  s->err_where[0] = '\0';
}

void ludo__session_error(const ludo_session_t *s, ludo_error_t *e) {
  e->code = s->err_code;
  e->message = s->err.p ? s->err.p : "";
  e->call = s->err_call ? s->err_call : "";
  e->phase = s->err_phase ? s->err_phase : "";
  e->where = s->err_where;
}

/* Ends the session's call with `rc` and `msg` without running it. */
static void fail_call(ludo_session_t *s, int rc, const char *msg) {
  set_err(s, s->kind, rc, msg, strlen(msg));
  s->status = rc;
  s->done = 1;
}

static void post(ludo_session_t *s, int phase) {
  s->phase = phase;
  ludo__core_post(&s->env->rt->core, &s->task);
}

/* Runs the host's completion callback of the finished call. A call with
 * a callback counts as in flight until here (ludo_runtime_run and poll
 * report it while its delivery is still queued or held). */
static void deliver(ludo_session_t *s) {
  ludo__core_t *c = &s->env->rt->core;
  ludo_call_cb cb = s->cb;
  void *ud = s->cb_ud;
  s->cb = NULL;
  s->cb_ud = NULL;
  s->phase = LUDO__PH_IDLE;
  if (cb == NULL) return;
  s->env->rt->calls--;
  c->in_callback++;
  if (s->status == 0)
    cb(s, 0, s->out.p ? s->out.p : "", s->out.len, ud);
  else
    cb(s, s->status, s->err.p ? s->err.p : "", s->err.len, ud);
  c->in_callback--;
}

/* The part of a call whose Lua failed: the transform or the rubric when
 * ludo.runner says it was running one (runner.doing), else the call.
 * Reads two values on the state's main thread: no allocation.
 * [-0, +0, -] */
static const char *failed_phase(ludo_session_t *s) {
  lua_State *L = s->ps->st.L;
  lua_Integer doing = 0;
  if (s->ps->doing_ref != LUA_NOREF && lua_checkstack(L, 2)) {
    if (lua_rawgeti(L, LUA_REGISTRYINDEX, s->ps->doing_ref) == LUA_TTABLE) {
      lua_rawgeti(L, -1, 1);
      doing = lua_tointeger(L, -1);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  return doing == 1 ? "transform" : doing == 2 ? "rubric"
                                               : call_name(s->kind);
}

/* A limit's message says in which phase the call was: "... during step",
 * "... during the rubric of step". */
static void note_phase(ludo_session_t *s) {
  if (s->err_phase != s->err_call)
    ludo__buf_printf(&s->err, " during the %s of %s", s->err_phase,
                     s->err_call);
  else
    ludo__buf_printf(&s->err, " during %s", s->err_call);
}

/* A result buffer above this keeps at most a quarter more than its
 * result; a call that leaves more garbage than the state holds live, and
 * at least this much, is followed by a collection (settle_memory). */
#define SETTLE_BYTES ((size_t)1 << 20)

/* After a call: an idle session holds what it uses, not what its last
 * call threw away (a big string it built and returned, say), which the
 * incremental collector would keep until later calls allocate enough;
 * nor a result buffer grown by doubling. The collection's work is
 * proportional to what the call allocated (Lua's own pause of 200 %,
 * applied when the call ends). Scripts cannot set __gc: only ludo's C
 * finalizers run. */
static size_t lua_heap(const ludo_session_t *s) {
  size_t used = s->ps->st.used; /* the result buffer is counted there too */
  return used > s->out.cap ? used - s->out.cap : 0;
}

static void settle_memory(ludo_session_t *s) {
  ludo__pstate_t *ps = s->ps;
  size_t lua;
  if (s->out.cap > SETTLE_BYTES && s->out.cap - s->out.len > s->out.len / 4)
    ludo__buf_fit(&s->out);
  lua = lua_heap(s);
  if (lua > SETTLE_BYTES && lua / 2 > ps->gc_base &&
      lua - ps->gc_base > SETTLE_BYTES) {
    lua_gc(ps->st.L, LUA_GCCOLLECT);
    ps->gc_base = lua_heap(s);
  }
}

static void on_done(ludo__sched_t *sc, int status, lua_State *co, void *ud) {
  ludo_session_t *s = ud;
  ludo_runtime_t *rt = s->env->rt;
  const char *phase = NULL; /* the Lua failed: the runner knows where */
  (void)sc;
  ludo__buf_reset(&s->out);
  if (status != 0 && status != LUDO_EBUSY) phase = failed_phase(s);
  if (status == 0 && s->kind != LUDO__CALL_CLOSE) {
    /* The result is written under the call's CPU budget, into a buffer
     * counted against the session's memory cap. */
    ludo__state_t *st = &s->ps->st;
    int own = !st->running; /* else the call's run goes on for this */
    lua_settop(co, 2);
    lua_rawgeti(co, LUA_REGISTRYINDEX, s->ps->encode_ref);
    lua_insert(co, 1);
    lua_pushlightuserdata(co, s);
    if (own && ludo__state_run_begin(st, co, 0) != 0) {
      lua_settop(co, 0);
      lua_pushliteral(co, "EBUSY: Lua runs nest too deeply");
      status = LUDO_EBUSY;
    } else {
      status = lua_pcall(co, 3, 0, 0);
      if (own) ludo__state_run_end(st);
      if (status != 0) status = ludo__state_error(st, co, status);
    }
    if (status != 0) ludo__buf_reset(&s->out);
  }
  if (status != 0) {
    size_t len = 0;
    const char *msg = lua_tolstring(co, -1, &len);
    if (msg == NULL) {
      msg = "ESCRIPT: unknown error";
      len = strlen(msg);
    }
    set_err(s, s->kind, status, msg, len);
    if (phase != NULL) s->err_phase = phase;
    if (status == LUDO_ETIMEOUT || status == LUDO_ENOMEM) {
      const ludo__state_t *st = &s->ps->st;
      memcpy(s->err_where, st->where, sizeof s->err_where);
      note_phase(s);
    }
    /* Nobody waits for the result of a module's close(): its failure
     * goes to the log. */
    if (s->kind == LUDO__CALL_CLOSE)
      ludo__log(&rt->core.log, LUDO_LOG_WARN, s->id, "close: %s",
                s->err.p ? s->err.p : "");
  }
  if (s->kind != LUDO__CALL_CLOSE) settle_memory(s);
  s->status = status;
  s->done = 1;
  if (s->cb != NULL)
    post(s, LUDO__PH_DELIVER); /* counted until delivered */
  else
    rt->calls--; /* a blocking call, or the module's close() */
}

/* The call can go on (an operation completed, or its slice ended). */
static void on_wake(ludo__sched_t *sc, void *ud) {
  (void)sc;
  post(ud, LUDO__PH_RUN);
}

static void teardown(ludo_session_t *s);
static void close_after_blocking(ludo_session_t *s);
static void close_when_released(ludo_session_t *s);

/* After Lua of this session ran: a close asked from inside it happens
 * now, unless a blocking call or batch holds the session (that caller
 * still reads it, and tears it down when it lets go) or another blocking
 * call runs the loop (the teardown runs callbacks: it waits with the
 * held deliveries). */
static void settle(ludo_session_t *s) {
  if (!s->close_requested || s->ps->sched.resuming || s->held > 0) return;
  if (s->env->rt->core.blocking)
    close_after_blocking(s);
  else
    teardown(s);
}

/* The runtime's wall-clock limit of a call, in ns (0: none). */
static uint64_t rt_wall_ns(const ludo_session_t *s) {
  return (uint64_t)s->env->rt->opts.wall_limit_ms * 1000000u;
}

static unsigned learning(const ludo_runtime_t *rt, ludo_session_t *s);

static void start(ludo_session_t *s, int sliceable) {
  ludo__sched_t *sc = &s->ps->sched;
  ludo__arena_t *arena = &s->ps->st.arena;
  const char *json = s->input;
  size_t len = s->input_len;
  uint64_t wall = rt_wall_ns(s);
  unsigned learn = learning(s->env->rt, s);
  int rc;
  if (learn != 0) ludo__arena_learn_begin(arena);
  s->started_at = ++s->env->rt->starts;
  sc->sliceable = sliceable;
  /* A limit set for this call alone, when it is the shorter one. */
  if (s->call_wall_ns != 0 && (wall == 0 || s->call_wall_ns < wall))
    wall = s->call_wall_ns;
  s->call_wall_ns = 0;
  sc->wall_ns = wall;
  rc = ludo__sched_start(sc, s->kind == LUDO__CALL_STEP &&
                                 s->ps->step_ref != LUA_NOREF
                             ? s->ps->step_ref : s->ps->dispatch_ref,
                         s->kind, json, len, on_done, s);
  if (learn != 0) ludo__arena_learn_end(arena, learn);
  if (rc != 0) { /* no call thread: fail the call */
    fail_call(s, rc, "ENOMEM: no memory left to start the call");
    if (s->cb != NULL)
      post(s, LUDO__PH_DELIVER); /* counted until delivered */
    else
      s->env->rt->calls--;
  }
}

/* ---- memory brought in ahead ----------------------------------------- */

/* Is the memory of `s` likely out of the caches? Every call started
 * since its last one touched another state, so the states' bytes touched
 * since are about (calls started since) x (mean state size): cold once
 * that passes prefetch_live. A session stepped in a small working set
 * stays warm however many sessions are open. */
static int cold(const ludo_runtime_t *rt, const ludo_session_t *s) {
  size_t mean = rt->lua_live / (rt->nsessions + 1u) + 1u;
  return rt->starts - s->started_at > rt->prefetch_live / mean;
}

_Static_assert(offsetof(ludo__state_t, arena) + sizeof(ludo__arena_t) ==
                   sizeof(ludo__state_t) &&
               offsetof(ludo__pstate_t, sched) + offsetof(ludo__sched_t, wake) -
                       offsetof(ludo__pstate_t, st.arena) <=
                   sizeof(ludo__arena_t) + 192,
               "a state's arena record ends it, and the pstate's references "
               "and the scheduler's first fields follow (env.h)");

/* Asks the processor for the lines the step of `s` reads, without waiting
 * for them, in three stages a step apart, each reading only what the one
 * before brought: 2, the session's record (reads nothing); 1, its state's
 * arena and call records, its result and input buffers; 0, the arena's
 * first chunks and its larger blocks (the state's tables, closures,
 * strings, threads and stack; once learned, only their lines a step
 * touches: script/arena.h, ludo__arena_prefetch). Of the C records, only
 * the fields a call reads, which their structs put first. Callers stepping
 * sessions in turn run stage k for the session k + 1 turns ahead. */
static void stage_ranges(const ludo_session_t *s, int stage,
                         ludo__range_fn fn, void *ud) {
  const ludo__pstate_t *ps;
  if (stage == 2) { /* reads nothing: s may be another owner's task */
    fn(s, offsetof(ludo_session_t, id), ud); /* what a call reads (env.h) */
    return;
  }
  ps = s->ps;
  if (ps == NULL) return;
  if (stage == 1) {
    /* what a call reads of its state (its first fields, to the
     * outermost running thread: state.h), and its arena's record, the
     * references and the scheduler's first fields, adjacent (env.h) */
    fn(ps, offsetof(ludo__state_t, chain) + sizeof ps->st.chain[0], ud);
    fn(&ps->st.arena, (size_t)((const char *)&ps->sched.wake -
                               (const char *)&ps->st.arena), ud);
    /* the last result's buffer (the next is written there) and the
     * copy of a queued call's input, both outside the arena */
    if (s->out.p != NULL)
      fn(s->out.p, s->out.len < 1024 ? s->out.len : 1024, ud);
    if (s->in.p != NULL)
      fn(s->in.p, s->in.len < 1024 ? s->in.len : 1024, ud);
  } else {
    ludo__arena_ranges(&ps->st.arena, fn, ud);
  }
}

/* Asks for stage `stage` of `s` (see stage_ranges). Stages 1 and 0 skip
 * a session that is not cold: asking for lines already in the caches
 * costs more than it saves. */
static void prefetch(const ludo_runtime_t *rt, const ludo_session_t *s,
                     int stage) {
  if (stage == 2 || cold(rt, s))
    stage_ranges(s, stage, ludo__prefetch_range, NULL);
}

void ludo__session_ranges(const ludo_session_t *s, ludo__range_fn fn,
                          void *ud) {
  int stage;
  for (stage = 2; stage >= 0; stage--) stage_ranges(s, stage, fn, ud);
}

/* A cheap first test: below prefetch_live of Lua state every session's
 * memory stays in the caches. */
static int prefetching(const ludo_runtime_t *rt) {
  return rt->lua_live > rt->prefetch_live;
}

/* The cache threshold (base/cacheprobe.h) when this call of `s` should
 * learn which lines of its arena a step touches, else 0: a step taken
 * cold while prefetching, one of the first LUDO__LEARN_STEPS, then one
 * in every LUDO__RELEARN_STEPS (each learns one phase of the lines anew:
 * what a step touches moves as the session's objects do). What is
 * learned narrows what stage 0 asks for ahead of its later steps from
 * every line of its arena's first chunks to those (script/arena.h,
 * ludo__arena_learn_begin). */
static unsigned learning(const ludo_runtime_t *rt, ludo_session_t *s) {
  ludo__pstate_t *ps = s->ps;
  if (s->kind != LUDO__CALL_STEP || !prefetching(rt) || !cold(rt, s))
    return 0;
  if (ps->st.arena.learned >= LUDO__LEARN_STEPS) {
    if (++ps->cold_steps < LUDO__RELEARN_STEPS) return 0;
    ps->cold_steps = 0;
  }
  return ludo__cache_threshold();
}

/* Learns the order of blocking calls, which tell the runtime nothing
 * about the session called next: a host stepping its sessions in turn
 * calls them in the same order each round, so the session called after
 * `s` last time is likely the one after it again. Links the last blocking
 * call's session to `s`; when that link was already there (the order
 * held), asks for the memory of the three sessions that followed `s` last
 * time, as a batch asks for its next entries. */
static void learn(ludo_runtime_t *rt, ludo_session_t *s) {
  ludo_session_t *p = rt->last_blocking, *t = s->after;
  int stage;
  rt->last_blocking = s;
  if (p == NULL || p == s) return;
  if (p->after != s) {
    if (p->after != NULL) p->after->before = NULL;
    if (s->before != NULL) s->before->after = NULL;
    p->after = s;
    s->before = p;
    return;
  }
  for (stage = 0; stage < 3 && t != NULL && t != s; stage++, t = t->after)
    prefetch(rt, t, stage);
}

/* Forgets a closing session in the learned order (see learn). */
static void unlearn(ludo_runtime_t *rt, ludo_session_t *s) {
  if (s->before != NULL) s->before->after = NULL;
  if (s->after != NULL) s->after->before = NULL;
  s->before = s->after = NULL;
  if (rt->last_blocking == s) rt->last_blocking = NULL;
}

/* The session whose task t is (integer arithmetic: t may be another
 * owner's task, whose would-be session the hint only asks for). */
static ludo_session_t *of_task(const ludo__task_t *t) {
  return (ludo_session_t *)((uintptr_t)t - offsetof(ludo_session_t, task));
}

/* The session's task: one step of its life, run from the loop. */
static void session_task(ludo__task_t *t) {
  ludo_session_t *s = of_task(t);
  if (s->closing) { /* ludo_session_close_async */
    if (s->env->rt->core.blocking)
      close_after_blocking(s); /* its callbacks wait for the call's end */
    else
      teardown(s);
    return;
  }
  switch (s->phase) {
    case LUDO__PH_START:
      s->phase = LUDO__PH_IDLE;
      start(s, 1);
      settle(s);
      break;
    case LUDO__PH_RUN:
      s->phase = LUDO__PH_IDLE;
      ludo__sched_continue(&s->ps->sched);
      settle(s);
      break;
    case LUDO__PH_DELIVER:
      if (s->env->rt->core.blocking) {
        /* No callbacks inside a blocking call: this task runs again once
         * the call has returned (the core holds it). */
        ludo__core_post_delivery(&s->env->rt->core, &s->task);
        break;
      }
      deliver(s); /* the callback may free s: nothing after it */
      break;
    default:
      break;
  }
}

int ludo__session_open(ludo_env_t *env, ludo_session_t **out) {
  ludo_runtime_t *rt = env->rt;
  ludo_session_t *s;
  ludo__pstate_t *ps;
  int rc;
  *out = NULL;
  if (rt->freeing) return LUDO_ECLOSED;
  if (!env->concurrent && env->nsessions > 0) {
    ludo__runtime_seterr(rt, "EBUSY: environment %s is not concurrent and "
                             "already has an open session", env->name);
    return LUDO_EBUSY;
  }
  s = ludo__calloc(&rt->core.heap, sizeof *s);
  if (s == NULL) return LUDO_ENOMEM;
  rc = ludo__env_acquire(env, &ps);
  if (rc != 0) {
    ludo__free(&rt->core.heap, s, sizeof *s);
    return rc;
  }
  s->env = env;
  s->ps = ps;
  if (ludo__uuid4(s->id) != 0)
    strcpy(s->id, "00000000-0000-4000-8000-000000000000");
  ps->st.who = s->id;
  ps->st.owner = s;
  ps->st.owner_is_session = 1;
  ps->sched.wake = on_wake;
  ps->sched.wake_ud = s;
  s->task.fn = session_task;
  ludo__buf_init(&s->out, ludo__state_alloc, &ps->st);
  ludo__buf_init(&s->err, ludo__alloc_fn, &rt->core.heap);
  ludo__buf_init(&s->in, ludo__alloc_fn, &rt->core.heap);
  s->next = rt->sessions;
  if (rt->sessions) rt->sessions->prev = s;
  rt->sessions = s;
  rt->nsessions++;
  env->nsessions++;
  ludo__env_want_refill(env);
  *out = s;
  return 0;
}

/* ---- asynchronous open ----------------------------------------------- */

typedef struct open_req_s {
  ludo__task_t task;
  ludo_env_t *env;
  ludo_open_cb cb;
  void *ud;
  struct open_req_s *next; /* in env->opens */
} open_req_t;

static void unlink_open(open_req_t *r) {
  open_req_t **pp;
  for (pp = (open_req_t **)&r->env->opens; *pp; pp = &(*pp)->next) {
    if (*pp == r) {
      *pp = r->next;
      break;
    }
  }
  r->env->opening--;
  r->env->rt->calls--;
}

void ludo__session_cancel_opens(ludo_env_t *env) {
  ludo__core_t *c = &env->rt->core;
  while (env->opens != NULL) {
    open_req_t *r = env->opens;
    ludo_open_cb cb = r->cb;
    void *ud = r->ud;
    ludo__core_unpost(c, &r->task);
    unlink_open(r);
    ludo__free(&c->heap, r, sizeof *r);
    c->in_callback++;
    cb(NULL, LUDO_ECANCELED, ud);
    c->in_callback--;
  }
}

static void open_task(ludo__task_t *t) {
  open_req_t *r = (open_req_t *)t;
  ludo_env_t *env = r->env;
  ludo__core_t *c = &env->rt->core;
  ludo_session_t *s = NULL;
  ludo_open_cb cb = r->cb;
  void *ud = r->ud;
  int rc;
  if (c->blocking) {
    /* No callbacks inside a blocking call: the open waits with the held
     * deliveries (still pending: ludo_env_free refuses, runtime_free
     * cancels it). */
    ludo__core_post_delivery(c, t);
    return;
  }
  rc = ludo__session_open(env, &s);
  unlink_open(r);
  ludo__free(&c->heap, r, sizeof *r);
  c->in_callback++;
  cb(s, rc, ud);
  c->in_callback--;
}

int ludo__session_open_async(ludo_env_t *env, ludo_open_cb cb, void *ud) {
  ludo__core_t *c = &env->rt->core;
  open_req_t *r;
  if (env->rt->freeing) return LUDO_ECLOSED;
  r = ludo__calloc(&c->heap, sizeof *r);
  if (r == NULL) return LUDO_ENOMEM;
  r->task.fn = open_task;
  r->env = env;
  r->cb = cb;
  r->ud = ud;
  r->next = env->opens;
  env->opens = r;
  env->opening++;
  env->rt->calls++;
  ludo__core_post(c, &r->task);
  return 0;
}

/* ---- calls ----------------------------------------------------------- */

int ludo__session_busy(const ludo_session_t *s) {
  /* s->batch: an entry of a blocking batch, held until the batch lets go
   * (batch_blocking), is busy like a queued call. */
  return s->ps->sched.in_call || s->ps->sched.resuming ||
         s->phase != LUDO__PH_IDLE || s->batch != NULL;
}

/* Refuses a call of `kind` on an idle session with `code` and `msg`: the
 * refusal is the session's last call (its status and message), so
 * whoever reports it (a blocking batch's callback) reads this call's
 * message, never a previous call's. Returns `code`. */
static int refuse(ludo_session_t *s, int kind, int code, const char *msg,
                  int n) {
  set_err(s, kind, code, msg, n > 0 ? (size_t)n : 0);
  s->status = code;
  s->done = 1;
  return code;
}

/* Checks that a call may start on `s` and prepares it. Non-blocking calls
 * copy their input. Returns 0 or a code (nothing changed then, but for
 * the message and status of a refusal of an idle session: refuse()). */
static int prepare(ludo_session_t *s, int kind, const char *json, size_t len,
                   ludo_call_cb cb, void *ud, int blocking) {
  size_t max = s->env->rt->opts.max_input_bytes;
  if (s->closing || s->close_requested || s->env->rt->freeing)
    return LUDO_ECLOSED;
  if (ludo__session_busy(s)) return LUDO_EBUSY;
  if (kind == LUDO__CALL_TASKS && !s->env->has_tasks) {
    char msg[160];
    int n = snprintf(msg, sizeof msg, "ENOTSUP: environment %.100s has no "
                     "tasks", s->env->label ? s->env->label : s->env->name);
    return refuse(s, kind, LUDO_ENOTSUP, msg, n);
  }
  if (json == NULL) len = 0;
  if (max != 0 && len > max) {
    char msg[160];
    int n = snprintf(msg, sizeof msg, "ETOOBIG: the %s is %zu bytes; the "
                     "limit is %zu (max_input_bytes)",
                     kind == LUDO__CALL_RESET   ? "reset options"
                     : kind == LUDO__CALL_TOOL  ? "tool call"
                     : kind == LUDO__CALL_TASKS ? "tasks request"
                                                : "action",
                     len, max);
    return refuse(s, kind, LUDO_ETOOBIG, msg, n);
  }
  if (blocking) {
    s->input = json;
  } else {
    ludo__buf_reset(&s->in);
    if (len > 0 && ludo__buf_add(&s->in, json, len)) return LUDO_ENOMEM;
    s->input = s->in.p;
  }
  s->input_len = len;
  s->kind = kind;
  s->done = 0;
  s->cb = cb;
  s->cb_ud = ud;
  s->env->rt->calls++;
  ludo__state_issue(&s->ps->st); /* for ludo_runtime_interrupt */
  return 0;
}

int ludo__session_call(ludo_session_t *s, int kind, const char *json,
                       size_t len, ludo_call_cb cb, void *ud,
                       const char **out, size_t *out_len) {
  ludo_runtime_t *rt = s->env->rt;
  int blocking = cb == NULL, rc;
  if (rt->freeing) return LUDO_ECLOSED; /* a callback of the free */
  if (blocking && !ludo__runtime_may_block(rt)) return LUDO_EBUSY;
  rc = prepare(s, kind, json, len, cb, ud, blocking);
  if (rc != 0) return rc;
  if (!blocking) {
    post(s, LUDO__PH_START);
    return 0;
  }
  ludo__core_block(&rt->core);
  s->held++;
  if (prefetching(rt)) learn(rt, s);
  start(s, 0);
  while (!s->done) ludo__core_run_once(&rt->core);
  s->held--;
  ludo__core_unblock(&rt->core);
  if (s->close_requested) {
    close_when_released(s);
    return LUDO_ECANCELED;
  }
  if (s->status != 0) return s->status;
  if (out) *out = s->out.p ? s->out.p : "";
  if (out_len) *out_len = s->out.len;
  return 0;
}

void ludo__session_hint(ludo__task_t *next, void *ud) {
  ludo__task_t *t = next;
  int stage;
  if (!prefetching(ud)) return;
  /* The third task's record is asked for whatever it is (a hint reads
   * nothing); the first two were asked for before, so reading them is
   * cheap. */
  for (stage = 0; stage < 2 && t != NULL; stage++, t = t->next)
    if (t->fn == session_task) prefetch(ud, of_task(t), stage);
  if (t != NULL) prefetch(ud, of_task(t), 2);
}

/* ---- batched steps --------------------------------------------------- */

typedef struct ludo__batch_s {
  ludo_batch_cb cb;
  void *ud;
  size_t left;             /* calls not yet delivered */
  ludo__alloc_t *heap;
} batch_t;

/* The per-session callback of a non-blocking batch. */
static void batch_cb(ludo_session_t *s, int status, const char *data,
                     size_t len, void *ud) {
  batch_t *b = ud;
  size_t i = s->batch_index;
  ludo_batch_cb cb = b->cb;
  void *bud = b->ud;
  if (--b->left == 0) ludo__free(b->heap, b, sizeof *b);
  cb(i, s, status, data, len, bud);
}

static void report(ludo_session_t *s, size_t i, int status, ludo_batch_cb cb,
                   void *ud) {
  const char *msg = ludo__err_name(status);
  if (status == 0)
    cb(i, s, 0, s->out.p ? s->out.p : "", s->out.len, ud);
  else if (s != NULL && s->done && s->status == status)
    cb(i, s, status, s->err.p ? s->err.p : "", s->err.len, ud);
  else
    cb(i, s, status, msg, strlen(msg), ud);
}

/* What rcs[n + i] says of entry i of a blocking batch: held, or why it
 * was refused with EINVAL (for its message). */
enum { BATCH_FREE, BATCH_HELD, BATCH_NULL, BATCH_OTHER_RT, BATCH_TWICE };

/* Holds every entry of a blocking batch before any starts (the first
 * entry's Lua runs inside start(): a host function there may close a
 * later entry, which must then be deferred, not torn down under us).
 * rcs[i] gets what prepare said, rcs[n + i] BATCH_HELD when ss[i] is held
 * (else why it was refused). A held entry is marked with the batch
 * (s->batch, unless another batch's mark is there): busy to other
 * callers until the batch lets go, and told apart when given twice, even
 * when prepare refused its first entry. Entries refused with EINVAL or
 * ECLOSED are never touched after. */
static void batch_hold(ludo_runtime_t *rt, ludo_session_t *const *ss,
                       const char *const *actions, const size_t *lens,
                       size_t n, int *rcs) {
  size_t i;
  for (i = 0; i < n; i++) {
    ludo_session_t *s = ss[i];
    rcs[n + i] = s == NULL              ? BATCH_NULL
                 : s->env->rt != rt     ? BATCH_OTHER_RT
                 : s->batch == (void *)rcs ? BATCH_TWICE
                                        : BATCH_FREE;
    if (rcs[n + i] != BATCH_FREE) {
      rcs[i] = LUDO_EINVAL;
      continue;
    }
    rcs[i] = prepare(s, LUDO__CALL_STEP, actions[i], lens[i], NULL, NULL, 1);
    if (rcs[i] == LUDO_ECLOSED) continue; /* its teardown is on its way */
    s->held++;
    rcs[n + i] = BATCH_HELD;
    if (s->batch == NULL) s->batch = (void *)rcs;
  }
}

/* The message of entry i refused with EINVAL (see batch_hold). */
static const char *batch_einval(int why) {
  return why == BATCH_NULL ? "EINVAL: the session is NULL"
         : why == BATCH_OTHER_RT
             ? "EINVAL: the session is another runtime's"
             : "EINVAL: the session is given twice in the batch";
}

/* Before starting entry i, asks for the memory of the three after it
 * (see prefetch). */
static void batch_prefetch(const ludo_runtime_t *rt,
                           ludo_session_t *const *ss, size_t n,
                           const int *rcs, size_t i) {
  int stage;
  for (stage = 0; stage < 3 && i + 1 + stage < n; stage++)
    if (rcs[i + 1 + stage] == 0) prefetch(rt, ss[i + 1 + stage], stage);
}

/* Starts the held entries; one closed before its turn (by an earlier
 * entry's host function) ends with ECANCELED without running. */
static void batch_start(ludo_runtime_t *rt, ludo_session_t *const *ss,
                        size_t n, int *rcs) {
  size_t i;
  int ahead = prefetching(rt);
  for (i = 0; i < n; i++) {
    ludo_session_t *s = ss[i];
    if (ahead) batch_prefetch(rt, ss, n, rcs, i);
    if (rcs[i] != 0) continue;
    if (s->close_requested) {
      fail_call(s, LUDO_ECANCELED, "ECANCELED: the session was closed");
      rt->calls--; /* prepare counted it */
      continue;
    }
    start(s, 0);
  }
}

/* Calls `cb` for every entry of a finished blocking batch, in order. */
static void batch_report(ludo_runtime_t *rt, ludo_session_t *const *ss,
                         size_t n, const int *rcs, ludo_batch_cb cb,
                         void *ud) {
  size_t i;
  rt->core.in_callback++;
  for (i = 0; i < n; i++) {
    ludo_session_t *s = ss[i];
    if (rcs[i] != 0) { /* not started: its code, and its own message */
      const char *msg = rcs[n + i] > BATCH_HELD ? batch_einval(rcs[n + i])
                                                : ludo__err_name(rcs[i]);
      if (rcs[n + i] == BATCH_HELD && rcs[i] != LUDO_EBUSY)
        report(s, i, rcs[i], cb, ud); /* prepare's own message */
      else
        cb(i, s, rcs[i], msg, strlen(msg), ud);
    } else if (s->close_requested) {
      report(NULL, i, LUDO_ECANCELED, cb, ud);
    } else {
      report(s, i, s->status, cb, ud);
    }
  }
  rt->core.in_callback--;
}

/* Runs a blocking batch: every entry held, every valid step started, all
 * awaited, then one callback per entry in order. A close from a host
 * function or a callback is deferred to the end (so a later entry, or
 * the same session given twice, is never freed under us). So are this
 * runtime's sessions that could not start but are not closing (busy,
 * input too big): a callback may close them before their own callback
 * reads their message. */
static int batch_blocking(ludo_runtime_t *rt, ludo_session_t *const *ss,
                          const char *const *actions, const size_t *lens,
                          size_t n, ludo_batch_cb cb, void *ud) {
  size_t i;
  int *rcs;
  if (n > SIZE_MAX / (2 * sizeof *rcs)) return LUDO_ENOMEM;
  rcs = ludo__malloc(&rt->core.heap, 2 * n * sizeof *rcs);
  if (rcs == NULL) return LUDO_ENOMEM;
  ludo__core_block(&rt->core);
  batch_hold(rt, ss, actions, lens, n, rcs);
  batch_start(rt, ss, n, rcs);
  for (i = 0; i < n; i++)
    while (rcs[i] == 0 && !ss[i]->done) ludo__core_run_once(&rt->core);
  ludo__core_unblock(&rt->core);
  batch_report(rt, ss, n, rcs, cb, ud);
  for (i = 0; i < n; i++) {
    ludo_session_t *s = ss[i];
    if (rcs[n + i] != BATCH_HELD) continue;
    if (s->batch == (void *)rcs) s->batch = NULL;
    if (--s->held == 0 && s->close_requested) close_when_released(s);
  }
  ludo__free(&rt->core.heap, rcs, 2 * n * sizeof *rcs);
  return 0;
}

static int batch_async(ludo_runtime_t *rt, ludo_session_t *const *ss,
                       const char *const *actions, const size_t *lens,
                       size_t n, ludo_batch_cb cb, void *ud) {
  batch_t *b = ludo__malloc(&rt->core.heap, sizeof *b);
  size_t i;
  if (b == NULL) return LUDO_ENOMEM;
  b->cb = cb;
  b->ud = ud;
  b->left = n;
  b->heap = &rt->core.heap;
  for (i = 0; i < n; i++) { /* all or nothing: check first */
    ludo_session_t *s = ss[i];
    int rc = 0;
    if (s == NULL || s->env->rt != rt || s->batch == (void *)b)
      rc = LUDO_EINVAL; /* another runtime's, or twice in the batch */
    else if (s->closing || s->close_requested)
      rc = LUDO_ECLOSED;
    else if (ludo__session_busy(s))
      rc = LUDO_EBUSY;
    if (rc != 0) {
      while (i-- > 0)
        if (ss[i] != NULL && ss[i]->batch == (void *)b) ss[i]->batch = NULL;
      ludo__free(b->heap, b, sizeof *b);
      return rc;
    }
    s->batch = (void *)b; /* marks it, to find it given twice */
  }
  for (i = 0; i < n; i++) {
    ludo_session_t *s = ss[i];
    int rc;
    s->batch = NULL;
    rc = prepare(s, LUDO__CALL_STEP, actions[i], lens[i], batch_cb, b, 0);
    if (rc != 0) { /* no memory for the copy, or over max_input_bytes */
      rt->calls++; /* its callback is owed: counted until delivered */
      s->cb = batch_cb;
      s->cb_ud = b;
      if (rc == LUDO_ENOMEM) fail_call(s, rc, "ENOMEM: cannot copy the "
                                              "action");
      s->status = rc; /* prepare wrote the message of ETOOBIG */
      s->done = 1;
      s->batch_index = i;
      post(s, LUDO__PH_DELIVER);
      continue;
    }
    s->batch_index = i;
    post(s, LUDO__PH_START);
  }
  return 0;
}

int ludo__session_step_batch(ludo_session_t *const *ss,
                             const char *const *actions, const size_t *lens,
                             size_t n, ludo_batch_cb cb, void *ud,
                             int blocking) {
  ludo_runtime_t *rt = ss[0]->env->rt;
  if (rt->freeing) return LUDO_ECLOSED; /* a callback of the free */
  if (blocking) {
    if (!ludo__runtime_may_block(rt)) return LUDO_EBUSY;
    return batch_blocking(rt, ss, actions, lens, n, cb, ud);
  }
  return batch_async(rt, ss, actions, lens, n, cb, ud);
}

/* ---- close ----------------------------------------------------------- */

/* Runs the module's close(), if any, under the cleanup budget; if it
 * waits, it is cancelled: closing is prompt. */
static void run_module_close(ludo_session_t *s) {
  ludo_runtime_t *rt = s->env->rt;
  ludo__sched_t *sc = &s->ps->sched;
  uint64_t budget = sc->budget_ns;
  if (budget == 0 || budget > CLOSE_BUDGET_NS) sc->budget_ns = CLOSE_BUDGET_NS;
  s->kind = LUDO__CALL_CLOSE;
  s->cb = NULL;
  rt->calls++;
  sc->sliceable = 0;
  sc->wall_ns = rt_wall_ns(s); /* not a limit the last call had alone */
  if (ludo__sched_start(sc, s->ps->dispatch_ref, LUDO__CALL_CLOSE, NULL, 0,
                        on_done, s) == 0) {
    if (sc->in_call) ludo__sched_cancel(sc);
  } else {
    rt->calls--;
  }
  sc->budget_ns = budget;
}

/* Ends the session's non-blocking call now, if one is queued, waiting or
 * done and not yet delivered: its callback runs here, with ECANCELED (or
 * its outcome, when that had come). */
static void end_call(ludo_session_t *s) {
  ludo_runtime_t *rt = s->env->rt;
  ludo__core_unpost(&rt->core, &s->task); /* held deliveries too */
  if (s->phase == LUDO__PH_START) { /* the call never began */
    fail_call(s, LUDO_ECANCELED, "ECANCELED: the call was cancelled");
    s->phase = LUDO__PH_DELIVER;
  }
  if (s->phase == LUDO__PH_DELIVER) deliver(s);
  /* A waiting call ends with ECANCELED; its callback runs now. */
  if (s->ps->sched.in_call) {
    ludo__sched_cancel(&s->ps->sched); /* posts the delivery... */
    ludo__core_unpost(&rt->core, &s->task);
    if (s->cb != NULL) deliver(s);     /* ...which happens now */
  }
}

/* Ends the session for good: its pending completion is delivered, a call
 * in flight ends with ECANCELED, close() runs, and the state is freed. */
static void teardown(ludo_session_t *s) {
  ludo_runtime_t *rt = s->env->rt;
  ludo_env_t *env = s->env;
  ludo_close_cb ccb;
  void *cud;
  int owed;
  s->closing = 1;
  s->close_requested = 0;
  end_call(s);
  ccb = s->close_cb; /* after the call's callback, which may not set it */
  cud = s->close_ud;
  owed = s->close_owed;
  run_module_close(s);
  ludo__buf_free(&s->out); /* in the state's memory: before the state */
  ludo__pstate_retire(rt, s->ps);
  s->ps = NULL;
  unlearn(rt, s);
  if (s->prev)
    s->prev->next = s->next;
  else
    rt->sessions = s->next;
  if (s->next) s->next->prev = s->prev;
  rt->nsessions--;
  env->nsessions--;
  ludo__buf_free(&s->err);
  ludo__buf_free(&s->in);
  ludo__free(&rt->core.heap, s, sizeof *s);
  if (owed) rt->calls--; /* with a callback or without */
  if (ccb != NULL) {
    rt->core.in_callback++;
    ccb(0, cud);
    rt->core.in_callback--;
  }
}

/* Closes a session a blocking call or batch waits on: its call ends now,
 * with ECANCELED (a wait it is in is cancelled), and that caller tears
 * the session down when it returns. */
static void close_held(ludo_session_t *s) {
  s->close_requested = 1;
  if (s->ps->sched.in_call && !s->ps->sched.resuming)
    ludo__sched_cancel(&s->ps->sched);
}

/* Asks the running Lua of this session to stop; the teardown follows when
 * it has returned to ludo. */
static void defer_close(ludo_session_t *s) {
  s->close_requested = 1;
  ludo__state_kill(&s->ps->st, LUDO__KILL_CLOSED);
}

/* Closes a session whose async call still owes its callback while a
 * blocking call runs the loop (from a host function, or a host handle's
 * callback on a borrowed loop): its call is cancelled now, and the
 * teardown, which runs that callback, is held with the other deliveries
 * until the outermost blocking call has returned. */
static void close_after_blocking(ludo_session_t *s) {
  ludo__core_t *c = &s->env->rt->core;
  if (s->ps->sched.in_call) ludo__sched_cancel(&s->ps->sched);
  s->closing = 1;
  ludo__core_unpost(c, &s->task);
  ludo__core_post_delivery(c, &s->task); /* session_task: teardown */
}

/* A blocking call or batch lets go of a session closed meanwhile: torn
 * down now, unless the teardown owes host callbacks (an async call's, a
 * close_async's): those never run inside the blocking call, so the
 * teardown, with them, goes to the loop (the session is closing until
 * then: new calls get ECLOSED). */
static void close_when_released(ludo_session_t *s) {
  if (s->held > 0) return;
  if (s->cb == NULL && s->close_cb == NULL) {
    teardown(s);
    return;
  }
  s->close_requested = 0;
  close_after_blocking(s);
}

void ludo__session_destroy(ludo_session_t *s) { teardown(s); }

void ludo__session_cancel(ludo_session_t *s) {
  if (s->closing) { /* a close_async, or a close after a blocking call */
    teardown(s);
    return;
  }
  end_call(s);
}

void ludo__session_close(ludo_session_t *s) {
  /* From a callback ludo_runtime_free runs: it tears s down itself,
   * once every callback owed has run. */
  if (s->closing || s->env->rt->freeing) return;
  if (s->ps->sched.resuming) {
    defer_close(s);
    return;
  }
  if (s->held) {
    close_held(s);
    return;
  }
  if (s->cb != NULL && s->env->rt->core.blocking > 0) {
    close_after_blocking(s);
    return;
  }
  ludo_env_t *env = s->env;
  if (s->closing) return;
  teardown(s);
  ludo__env_refill_blocking(env);
}

int ludo__session_close_async(ludo_session_t *s, ludo_close_cb cb,
                              void *ud) {
  if (s->closing || s->close_requested || s->env->rt->freeing)
    return LUDO_ECLOSED;
  s->close_cb = cb;
  s->close_ud = ud;
  s->close_owed = 1; /* ludo_runtime_run waits for it, cb or not */
  s->env->rt->calls++;
  if (s->ps->sched.resuming) {
    defer_close(s);
    return 0;
  }
  if (s->held) {
    close_held(s);
    return 0;
  }
  s->closing = 1;
  ludo__core_post(&s->env->rt->core, &s->task);
  return 0;
}
