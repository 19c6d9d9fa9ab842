/* ludo_defs.h - the types and constants of ludo's C API that need no
 * prototypes: version, visibility, error codes, log levels, the allocator
 * and log hooks. ludo.h includes it; the runtime's lower layers include it
 * alone, so they never depend on the API built on top of them. */
#ifndef LUDO_DEFS_H
#define LUDO_DEFS_H

#include <stddef.h>
#include <stdint.h>

#define LUDO_VERSION_MAJOR 0
#define LUDO_VERSION_MINOR 1
#define LUDO_VERSION_PATCH 0
#define LUDO_VERSION_STRING "0.1.0"

#if defined(__GNUC__)
#define LUDO_EXTERN __attribute__((visibility("default")))
#else
#define LUDO_EXTERN
#endif

/* Error codes, grouped by range: -1xx I/O, -2xx protocol/parse, -3xx
 * argument/state, -4xx callback/script, -5xx memory, -6xx sandbox limits. */
#define LUDO_ERRNO_MAP(X)                                                    \
  X(EIO, -100, "input/output error")                                         \
  X(ENOENT, -101, "no such file or module")                                  \
  X(ECONNECT, -102, "cannot connect to the server")                          \
  X(EDISCONNECTED, -103, "the connection to the server was lost")            \
  X(ENOREPLY, -104, "the server did not reply in time")                      \
  X(EPARSE, -200, "malformed JSON")                                          \
  X(ESCHEMA, -201, "value does not match the declared schema")               \
  X(EVALUE, -202, "value cannot be represented as JSON")                     \
  X(ETOOBIG, -203, "input larger than the configured limit")                 \
  X(EPROTO, -204, "the server broke the protocol")                           \
  X(EINVAL, -300, "invalid argument")                                        \
  X(EBUSY, -301, "a call is already in progress")                            \
  X(ECLOSED, -302, "session or runtime is closed")                           \
  X(ECANCELED, -303, "call was cancelled")                                   \
  X(ENOTSUP, -304, "not offered by the environment")                         \
  X(ERANGE, -305, "index out of range")                                      \
  X(ECAPACITY, -306, "the server is at capacity")                            \
  X(ESCRIPT, -400, "error raised by Lua code")                               \
  X(ELOAD, -401, "environment module failed to load")                        \
  X(ENOMEM, -500, "memory limit exceeded")                                   \
  X(ETIMEOUT, -600, "CPU budget exceeded")

typedef enum {
#define LUDO__ERR_ENUM(name, code, msg) LUDO_##name = (code),
  LUDO_ERRNO_MAP(LUDO__ERR_ENUM)
#undef LUDO__ERR_ENUM
  LUDO_OK = 0
} ludo_errno_t;

/* Log levels, lowest is most verbose. */
typedef enum {
  LUDO_LOG_DEBUG = 0,
  LUDO_LOG_INFO = 1,
  LUDO_LOG_WARN = 2,
  LUDO_LOG_ERROR = 3
} ludo_log_level_t;

/* Receives log lines: Lua print() output of a session (level INFO, `who` is
 * the session id) and runtime messages (`who` is "ludo"). `msg` is borrowed
 * until the callback returns and is not NUL-terminated past `len` in general
 * (it is NUL-terminated, but may contain NUL bytes from Lua strings). */
typedef void (*ludo_log_cb)(void *ud, ludo_log_level_t level, const char *who,
                            const char *msg, size_t len);

/* Allocator hook with lua_Alloc's contract: nsize == 0 frees ptr and returns
 * NULL; otherwise returns a block of nsize bytes (moving ptr's contents) or
 * NULL on failure, leaving ptr untouched. osize is the old size when ptr is
 * not NULL. Every byte the runtime allocates, Lua states included, goes
 * through it. */
typedef void *(*ludo_alloc_fn)(void *ud, void *ptr, size_t osize,
                               size_t nsize);

typedef struct ludo_runtime_s ludo_runtime_t;
typedef struct ludo_env_s ludo_env_t;
typedef struct ludo_session_s ludo_session_t;
typedef struct ludo_script_s ludo_script_t;

/* Runtime options. Initialise with ludo_options_init() and change fields. */
typedef struct ludo_options_s {
  ludo_alloc_fn alloc;     /* NULL: malloc/realloc/free */
  void *alloc_ud;          /* passed to alloc */
  size_t memory_cap;       /* bytes per session Lua state; default 64 MiB;
                              0 = none (a zero-filled struct has no cap:
                              start from ludo_options_init) */
  uint32_t cpu_budget_ms;  /* Lua running time per call: the time its Lua
                              runs (monotonic clock, from each resume to
                              its yield or end; waits do not count, time
                              the OS gives other threads meanwhile does:
                              on an oversubscribed machine a call can
                              meet it with less CPU); default 10000;
                              0 = none. Under a second it is measured on
                              the precise clock, never ending a call
                              early; from a second on on the kernel's
                              coarse clock, which may end one a few ms
                              (under 1 %) early. The same for
                              wall_limit_ms */
  size_t max_input_bytes;  /* largest action / reset options / script
                              arguments a call accepts; default 8 MiB;
                              0 = none */
  uint32_t wall_limit_ms;  /* wall-clock time per call, waits included
                              (ludo.sleep, later I/O) and running Lua
                              stopped at it too; default 60000; 0 = none */
  uint64_t max_instructions; /* VM instructions per call; 0 = no limit */
  const char *module_path; /* ';'-separated roots holding lua/, rubrics/,
                              features/; searched before the embedded copies.
                              NULL: $LUDO_PATH, else none. Copied. */
  ludo_log_cb log;         /* NULL: lines at WARN and above go to stderr */
  void *log_ud;            /* passed to log */
  unsigned prewarm;        /* pre-warmed session states kept per env;
                              default 4 */
  void *loop;              /* a uv_loop_t* of the host's to run on
                              (borrowed until ludo_runtime_free and the
                              host's next uv_run; one runtime per loop),
                              or NULL for an own loop */
  uint32_t slice_us;       /* on a host-run loop, Lua runs at most this
                              long before yielding to the loop (the call
                              goes on in the next pass); 0: no slicing.
                              Default 0. Polls use their own budget. */
  unsigned lua_client;     /* where Lua may require("ludo.client") and
                              reach OpenEnv servers over the network:
                              LUDO_LUA_CLIENT_SCRIPTS (scripts: policies,
                              tools run by ludo_script_open),
                              LUDO_LUA_CLIENT_SESSIONS (environment code:
                              leaves the sandbox, docs/sandbox.md).
                              Default 0: nowhere */
  unsigned lua_llm;        /* where Lua may require("ludo.llm") and call
                              LLM APIs over HTTP (docs/llm.md):
                              LUDO_LUA_LLM_SCRIPTS (scripts: LLM
                              policies), LUDO_LUA_LLM_SESSIONS
                              (environment code: LLM judges in rubrics;
                              leaves the sandbox). Default 0: nowhere */
} ludo_options_t;

/* Servers on several threads (workers) serving one environment on one
 * port: see ludo_server_group_new. */
typedef struct ludo_server_group_s ludo_server_group_t;

/* The most servers a group holds. */
#define LUDO_SERVER_MAX_WORKERS 1024

/* Flags of ludo_options_t.lua_client. */
#define LUDO_LUA_CLIENT_SCRIPTS 1u
#define LUDO_LUA_CLIENT_SESSIONS 2u

/* What a session's or script's ludo.llm calls spent (ludo.h,
 * ludo_session_llm_usage): a call is one c:chat / c:complete; its
 * retries are counted apart; latency_ms sums the calls' wall time
 * (queueing and retries in). */
typedef struct ludo_llm_usage_s {
  uint64_t calls;             /* calls finished (succeeded or failed) */
  uint64_t failures;          /* calls that returned nil, "ELLM: ..." */
  uint64_t retries;           /* attempts beyond each call's first */
  uint64_t prompt_tokens;     /* as the server reported them */
  uint64_t completion_tokens;
  double latency_ms;
} ludo_llm_usage_t;

/* Flags of ludo_options_t.lua_llm. */
#define LUDO_LUA_LLM_SCRIPTS 1u
#define LUDO_LUA_LLM_SESSIONS 2u

/* Options of an OpenEnv server (ludo_server_new). Initialise with
 * ludo_server_options_init(); a field left 0 takes its default. */
typedef struct ludo_server_options_s {
  int production;              /* 1: OpenEnv's production mode, without
                                  /reset, /step, /state */
  unsigned max_sessions;       /* sessions open at once, of every kind
                                  (WebSocket, HTTP, MCP): default 1024,
                                  and 1 for an environment declared
                                  concurrent = false (more is refused);
                                  at capacity an idle session made by
                                  POST /reset gives way to a new one */
  uint32_t session_timeout_ms; /* a session with no reset, step or tool
                                  call for this long is closed, and its
                                  WebSocket too; 0: never */
  uint32_t http_session_timeout_ms; /* the same for sessions made by
                                  POST /reset or openenv/session/create,
                                  which have no socket to end them:
                                  default 300000 (POST /reset's go
                                  sooner when capacity needs them) */
  const char *token;           /* when set, every route but /health needs
                                  "Authorization: Bearer <token>" */
  int strict;                  /* check observations against the declared
                                  schema (ludo_session_set_strict) */
  size_t max_message_bytes;    /* a WebSocket message or a request body:
                                  default 16 MiB */
  size_t max_header_bytes;     /* a request's head: default 16 KiB */
  uint32_t ping_interval_ms;   /* keepalive pings on WebSockets: default
                                  20000; UINT32_MAX: none */
  uint32_t pong_timeout_ms;    /* a pong must come within: default 20000 */
  unsigned max_connections;    /* connections open at once: default
                                  16384 */
  ludo_server_group_t *group;  /* NULL (default): the server stands alone.
                                  Else one of a group's servers, each on
                                  its own thread and loop: they share the
                                  session count max_sessions applies to,
                                  the metrics and the port, and pass calls
                                  on a named session to the server that
                                  owns it. Borrowed: the group outlives
                                  the server */
  unsigned worker;             /* the server's index in `group`: 0 to its
                                  size - 1, each taken by one server */
  int reuseport;               /* 1: listen with SO_REUSEPORT, so other
                                  sockets that set it (other processes
                                  of the same user) share the port and
                                  the kernel spreads connections. Always
                                  on in a group of several servers, where
                                  worker 0 first checks that nothing
                                  listens on the port yet. Default 0 */
  uint32_t drain_timeout_ms;   /* ludo_server_close first lets the calls
                                  in flight finish and answer (new calls
                                  are refused, messages queued behind a
                                  call are dropped), for at most this
                                  long; then the calls still running are
                                  cancelled. Default 10000; UINT32_MAX:
                                  no draining */
  size_t max_output_bytes;     /* bytes waiting to be sent to clients that
                                  do not read, all connections together
                                  (of a group too): a connection whose
                                  next reply would pass it while earlier
                                  ones wait unsent is closed (a WebSocket
                                  with 1008). Each connection may hold
                                  64 KiB besides, and always its next
                                  reply once the earlier ones went out.
                                  Default 256 MiB */
} ludo_server_options_t;

typedef struct ludo_server_s ludo_server_t;

/* Options of a client of an OpenEnv server (ludo_client_connect).
 * Initialise with ludo_client_options_init(); a field left 0 takes its
 * default. */
typedef struct ludo_client_options_s {
  uint32_t connect_timeout_ms; /* resolving the name, connecting and the
                                  WebSocket handshake: default 10000 */
  uint32_t timeout_ms;         /* waiting for a reply: default 60000;
                                  UINT32_MAX: no limit. A call that runs
                                  out of it fails with LUDO_ENOREPLY and
                                  the connection is dropped */
  uint32_t ping_interval_ms;   /* keepalive pings after this long without
                                  a frame from the server: default 20000;
                                  UINT32_MAX: none (tunnels that drop
                                  pings, OpenEnv issue #875) */
  uint32_t pong_timeout_ms;    /* the server must answer a ping within:
                                  default 20000 */
  size_t max_message_bytes;    /* the largest reply accepted: default
                                  100 MiB, as OpenEnv's client */
  const char *token;           /* sent as "Authorization: Bearer <token>"
                                  (ludo serve --token); copied; NULL:
                                  none */
  int no_reconnect;            /* 1: once the connection is lost, every
                                  call fails with LUDO_EDISCONNECTED
                                  (default 0: the next reset, or tool call,
                                  connects again) */
} ludo_client_options_t;

typedef struct ludo_client_s ludo_client_t;

/* Memory figures of a runtime. */
typedef struct ludo_stats_s {
  size_t lua_bytes;      /* bytes held by the Lua states of sessions, of
                            pre-warmed pools and of scripts (0 once every
                            session is closed, every script and every
                            environment freed) */
  size_t heap_bytes;     /* all bytes the runtime holds through its
                            allocator: Lua states, the compiled-code cache,
                            buffers, the runtime itself */
  unsigned sessions;     /* open sessions */
  unsigned prewarmed;    /* ready states waiting in env pools */
  unsigned calls;        /* calls in flight */
} ludo_stats_t;

/* A host module: a table of C functions that every session state of an
 * environment (ludo_env_options_t.modules) or of a whole runtime
 * (ludo_runtime_add_module) can `require(name)`. Each function receives `ud` as its first
 * upvalue (lua_touserdata(L, lua_upvalueindex(1))) and the session through
 * ludo_session_from_lua(L). Functions follow lua_CFunction rules and may
 * raise Lua errors. `funcs` is a luaL_Reg-shaped array ending with
 * {NULL, NULL}; declared as void pointers so this header does not need
 * lua.h. Borrowed until the environment is freed (given to
 * ludo_env_load) or the runtime is (given to ludo_runtime_add_module). */
typedef struct ludo_host_func_s {
  const char *name;
  int (*fn)(void *L); /* really lua_CFunction: int (*)(lua_State *) */
} ludo_host_func_t;

typedef struct ludo_host_module_s {
  const char *name;               /* module name for require() */
  const ludo_host_func_t *funcs;  /* NULL-terminated */
  void *ud;                       /* first upvalue of every function */
} ludo_host_module_t;

/* Environment load options. Initialise with ludo_env_options_init(). */
typedef struct ludo_env_options_s {
  const ludo_host_module_t *modules; /* array of host modules or NULL */
  size_t nmodules;
} ludo_env_options_t;

/* The last failed call of a session or a script, in parts
 * (ludo_session_error, ludo_script_error). Every string is borrowed until
 * the next call on the session or script, or its close; none is NULL. */
typedef struct ludo_error_s {
  int code;             /* LUDO_E* code; 0 when no call has failed yet */
  const char *message;  /* the message, as ludo_session_errmsg() */
  const char *call;     /* the call that failed: "reset", "step",
                           "state", "close", "tool call", "tasks"; for a
                           script, the name of the function called */
  const char *phase;    /* the part of it that was running: the call
                           itself, or "transform" or "rubric" (a session's
                           transform or rubric, in reset or step) */
  const char *where;    /* for LUDO_ETIMEOUT and LUDO_ENOMEM: where the
                           Lua was when the limit stopped it,
                           "examples/x/env.lua:12"; when that is in ludo's
                           own library, also the innermost place in other
                           code, "lua/ludo/async.lua:40, from
                           examples/x/env.lua:12". "" when unknown or for
                           other codes */
} ludo_error_t;

/* Completion callback of a non-blocking call. `status` is 0 or a negative
 * code; on success `data` is the result JSON, on failure the error message.
 * `data` is borrowed until the callback returns. The callback may start the
 * next call on the same session or close it. */
typedef void (*ludo_call_cb)(ludo_session_t *s, int status, const char *data,
                             size_t len, void *ud);

/* Completion of ludo_session_open_async: `s` is the new session (NULL on
 * failure), `status` 0 or a negative code (the message is in
 * ludo_runtime_errmsg). */
typedef void (*ludo_open_cb)(ludo_session_t *s, int status, void *ud);

/* Completion of ludo_session_close_async; the session is gone. */
typedef void (*ludo_close_cb)(int status, void *ud);

/* Completion of a client call (ludo_client_*_async): `status` 0 or a
 * negative code; on success `data` is the result JSON, on failure the
 * error message (also in ludo_client_errmsg). Borrowed until the callback
 * returns. The callback may start the next call on `c`, or close it. */
typedef void (*ludo_client_cb)(ludo_client_t *c, int status,
                               const char *data, size_t len, void *ud);

/* Completion of ludo_script_call_async: status 0 and `out`/`len` the JSON
 * of the function's first result (null when it returned nothing), or a
 * negative code and `out` the error message (also in
 * ludo_script_errmsg). Borrowed until the callback returns. The callback
 * may start the script's next call, or free the script. */
typedef void (*ludo_script_cb)(ludo_script_t *sc, int status,
                               const char *out, size_t len, void *ud);

/* One result of a batched step: the i-th session's status and result (or
 * error message), borrowed until the callback returns. `s` is NULL for an
 * entry closed during the batch (its status LUDO_ECANCELED). */
typedef void (*ludo_batch_cb)(size_t i, ludo_session_t *s, int status,
                              const char *data, size_t len, void *ud);

/* The events of ludo_json_parse (ludo.h), in document order. Each returns
 * 0 to go on, or nonzero to stop the parse; any may be NULL (the event is
 * dropped). Strings and keys are borrowed until the callback returns, are
 * valid UTF-8, are not NUL-terminated and may hold NUL bytes (from
 * \u0000). A number with '.', 'e' or 'E' is a real; any other is an
 * integer. Keys may repeat: each is reported. */
typedef struct ludo_json_cb_s {
  int (*null_value)(void *ud);
  int (*boolean)(void *ud, int value);
  int (*integer)(void *ud, int64_t value);
  int (*real)(void *ud, double value);
  int (*string)(void *ud, const char *s, size_t len);
  int (*key)(void *ud, const char *s, size_t len);
  int (*begin_object)(void *ud);
  int (*end_object)(void *ud);
  int (*begin_array)(void *ud);
  int (*end_array)(void *ud);
} ludo_json_cb_t;

/* Where and why ludo_json_parse stopped. */
typedef struct ludo_json_error_s {
  size_t offset;  /* 0-based byte offset of the offending byte */
  size_t line;    /* 1-based */
  size_t column;  /* 1-based, in bytes from the start of the line */
  char msg[112];  /* "invalid token near 'nul'", without the position */
} ludo_json_error_t;

#endif /* LUDO_DEFS_H */
