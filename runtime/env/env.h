/* env.h - environments and sessions: the runtime object, environment
 * modules loaded from folders, pools of pre-warmed session states, and
 * session calls (reset/step/state) with their JSON results. */
#ifndef LUDO_ENV_ENV_H
#define LUDO_ENV_ENV_H

#include <uv.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/log.h"
#include "base/uuid.h"
#include "ludo_defs.h"
#include "script/modules.h"
#include "script/sched.h"
#include "script/state.h"
#include "script/watchdog.h"

/* Call kinds, as ludo.runner numbers them. */
enum { LUDO__CALL_RESET = 1, LUDO__CALL_STEP, LUDO__CALL_STATE,
       LUDO__CALL_CLOSE };

/* A prepared session state: sandboxed state + scheduler + runner. */
typedef struct ludo__pstate_s {
  ludo__state_t st;
  ludo__sched_t sched;
  int dispatch_ref;
  int named_ref;               /* the rubric's {name, rubric} pairs */
  int encode_ref;              /* the result encoder closure */
  struct ludo__pstate_s *next;
} ludo__pstate_t;

struct ludo_runtime_s {
  ludo__alloc_t heap;
  ludo_options_t opts;
  char *module_path;           /* owned copy */
  ludo__log_t log;
  uv_loop_t loop;
  ludo__watchdog_t watchdog;
  int has_watchdog;            /* CPU budgets by signal (else count hook) */
  ludo__codecache_t cache;
  ludo__registry_t cmods;      /* C modules every session can require */
  struct ludo__schema_s *reset_schema; /* reset options, shared */
  ludo_env_t *envs;
  ludo_session_t *sessions;    /* all open sessions */
  ludo_session_t *ready_head, *ready_tail; /* completions to deliver */
  size_t lua_live;             /* bytes in session and pool states */
  unsigned nsessions, calls;
  int in_uv;                   /* inside uv_run */
  int in_callback;             /* inside a user completion callback */
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
  int concurrent;
  unsigned nsessions;
  ludo__pstate_t *pool;        /* ready states */
  unsigned npool, target;
  uv_idle_t refill;
  int refill_on;
};

struct ludo_session_s {
  ludo_env_t *env;
  ludo__pstate_t *ps;
  char id[LUDO__UUID_LEN + 1];
  void *data;
  ludo__buf_t out;             /* last result JSON */
  ludo__buf_t err;             /* last error message */
  ludo__buf_t in;              /* input copy of a non-blocking call */
  int kind, status, done;
  int closing;
  ludo_call_cb cb;
  void *cb_ud;
  int queued;
  ludo_session_t *ready_next;
  ludo_session_t *next, *prev;
};

/* Builds a prepared state for env. On failure writes rt->errmsg. */
int ludo__env_build(ludo_env_t *env, ludo__pstate_t **out);
void ludo__pstate_free(ludo_runtime_t *rt, ludo__pstate_t *ps);

/* Environment lifecycle (env.c). */
int ludo__env_load(ludo_runtime_t *rt, const char *path,
                   const ludo_env_options_t *opts, ludo_env_t **out);
void ludo__env_destroy(ludo_env_t *env);
void ludo__env_want_refill(ludo_env_t *env);

/* Sessions (session.c). */
int ludo__session_open(ludo_env_t *env, ludo_session_t **out);
void ludo__session_close(ludo_session_t *s);
int ludo__session_call(ludo_session_t *s, int kind, const char *json,
                       size_t len, ludo_call_cb cb, void *ud,
                       const char **out, size_t *out_len);
/* Pushes the closure that writes a call's result JSON. [-0, +1, m] */
void ludo__session_push_encoder(lua_State *L);
/* Delivers queued completions. */
void ludo__runtime_drain(ludo_runtime_t *rt);

/* Formats rt->errmsg. */
void ludo__runtime_seterr(ludo_runtime_t *rt, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
