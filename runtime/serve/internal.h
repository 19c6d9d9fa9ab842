/* internal.h - what the files of runtime/serve share: the server, its
 * session records, WebSocket clients, and the helpers between them. Not
 * for use outside runtime/serve. */
#ifndef LUDO_SERVE_INTERNAL_H
#define LUDO_SERVE_INTERNAL_H

#include <jansson.h>
#include <uv.h>

#include "base/buf.h"
#include "net/http.h"
#include "net/server.h"
#include "net/ws.h"
#include "serve/serve.h"

#define SV_BUCKETS 1024       /* session id hash buckets */
#define SV_PROXY_BUCKETS 64   /* proxy hash buckets (by number) */
#define SV_WS_QUEUE_MAX 64    /* messages a client may send ahead */
#define SV_MCP_BATCH_MAX 64   /* requests in a JSON-RPC batch */
#define SV_WS_QUEUE_FREE ((size_t)64 << 10) /* queued bytes a client holds
                                 before they count against the server's
                                 input budget */
#define SV_WRAP_KEEP 65536    /* scratch for /ws replies kept between uses */
#define SV_SHUTTING_DOWN "the server is shutting down" /* 503's detail */
#define SV_EVICTED_KEEP 64    /* ids of sessions closed to make room that
                                 a server remembers, to say so (reclaim.c) */

/* Why a WebSocket client's input ended (sv_ws_t.ending). */
enum { SV_END_COUNT = 1, SV_END_BYTES, SV_END_BINARY };

typedef struct sv_sess_s sv_sess_t;
typedef struct sv_ws_s sv_ws_t;
typedef struct sv_fwd_s sv_fwd_t;
typedef struct sv_batch_s sv_batch_t; /* mcp.c */

/* How a session came to be, which decides its idle timeout and who may
 * close it. */
enum { SV_SESS_WS = 1, SV_SESS_MCP_WS, SV_SESS_HTTP, SV_SESS_MCP,
       SV_SESS_EPHEMERAL };

/* Called when a session's open or call completes: status 0 or a LUDO_E*
 * code, data/len the result or error text (borrowed). */
typedef void (*sv_done_fn)(sv_sess_t *x, int status, const char *data,
                           size_t len);

/* What a call touches comes first (two cache lines): with a thousand
 * sessions each step finds its record out of the caches. */
struct sv_sess_s {
  ludo__serve_t *sv;
  ludo_session_t *s;        /* NULL while opening */
  sv_ws_t *ws;              /* the WebSocket it belongs to, or NULL */
  sv_ws_t *caller;          /* the WebSocket whose call is in flight: its
                               answer goes there, not to one attached
                               since; cleared when that one leaves */
  sv_done_fn done;          /* the continuation of the open or call */
  uint64_t last_ms;         /* last reset, step or tool call */
  uint64_t t0_us;           /* when the call's message arrived */
  unsigned owner;           /* a proxy: 1 + the owning worker; 0: ours */
  int kind;                 /* SV_SESS_* */
  int opening, busy;        /* an open or a call in flight */
  int dead;                 /* closed (or closing): no new calls */
  int in_cb, in_close;      /* inside its continuation / its close: the
                               record is freed by whoever returns last */
  /* The continuation's context (one call at a time per session). */
  int call;                 /* LUDO__CALL_* in flight */
  ludo__http_req_t *req;    /* HTTP request to answer, or NULL */
  json_t *rpc_id;           /* JSON-RPC id of the request, or NULL */
  int rpc_ws;               /* answer JSON-RPC on ws (1: raw, 2: in an
                               OpenEnv {"type":"mcp"} frame) */
  int route;                /* tasks.c: the Task API route it answers */
  uint32_t wall_ms;         /* the wall-clock limit of its next call when
                               shorter than the runtime's (timeout_s of
                               POST /step), 0: none; sv_sess_call takes
                               it */
  char *pending;            /* input of a call waiting for the open */
  size_t pending_len;
  char id[48];
  sv_sess_t *next, *prev;   /* all sessions */
  sv_sess_t *hnext;         /* hash chain (a proxy: of the proxies) */
  /* Workers (forward.c). A proxy stands on this server for a session of
   * another worker, for one forwarded request or for the life of an
   * attached WebSocket; it is not in the session list or count (`owner`
   * above: 1 + the owning worker; 0: ours). */
  int fwd_op;               /* a proxy: what it asked (SV_FWD_*) */
  int gone;                 /* a proxy: the owner dropped it already */
  uint64_t seq;             /* a proxy: its number, named by answers */
  uint64_t ws_serial;       /* a request's proxy: the serial of `ws` */
  unsigned fwd_from;        /* ours, running a forwarded call: 1 + the
                               asking worker, 0: none */
  uint64_t fwd_seq;         /* ... and the number of its proxy there */
  /* reclaim.c: an HTTP session, idle and with no WebSocket, is on its
   * server's list of sessions that give way to a newcomer at capacity. */
  sv_sess_t *lnext, *lprev; /* that list, least recently used first */
  uint64_t idle_us;         /* when it was listed (sv_now_us) */
  int listed;               /* on it */
  int slot_given;           /* its slot is no longer counted for it: it
                               went to a newcomer (reclaim.c), or back at
                               the close (serve.c give_back_slot) */
};

struct sv_ws_s {
  ludo__serve_t *sv;
  ludo__ws_t *ws;           /* NULL once closed */
  int mcp;                  /* WS /mcp: raw JSON-RPC frames */
  sv_sess_t *sess;          /* its session (NULL before it opens) */
  int closing;              /* a close frame was sent */
  sv_batch_t *batch;        /* WS /mcp: the JSON-RPC batch being answered
                               (the messages after it wait), or NULL */
  /* Messages that came while the session was busy or opening. */
  struct sv_msg_s *head, *tail;
  unsigned queued;
  size_t queued_bytes;      /* the memory they hold */
  size_t charged;           /* what of it counts against the server's
                               input budget (past SV_WS_QUEUE_FREE) */
  int ending;               /* SV_END_*: a message was refused (one too
                               many, too many bytes, a binary frame): the
                               queued ones are answered, then the error
                               and a close; later messages are dropped */
  sv_ws_t *next, *prev;     /* all clients */
  uint64_t serial;          /* unique on its server: tells it from a
                               client allocated at its address later */
  /* A remote record (forward.c): stands for a WebSocket of another
   * worker attached to our session `sess` (ws is NULL); 0: a real one. */
  unsigned remote_from;     /* 1 + that worker */
  uint64_t remote_seq;      /* the number of its proxy there */
  sv_fwd_t *waiting;        /* a remote record's call that came while the
                               session was busy with an earlier client's
                               call: it runs when that ends (sv_ws_pump) */
};

/* A message between the workers of a group (forward.c; group.c carries
 * it): a call on a session to the worker that owns it, or an answer. Made
 * with sv_fwd_new, freed with sv_fwd_free, by whichever thread holds it. */
enum {
  /* asking: to the owner of session `id` */
  SV_FWD_HTTP = 1,   /* reset/step/state (`kind`) of an X-Session-Id
                        request; data: the input */
  SV_FWD_TOOL,       /* JSON-RPC tools/call with session_id; data: the
                        call {"name","arguments"} */
  SV_FWD_CLOSE,      /* JSON-RPC openenv/session/close */
  SV_FWD_ATTACH,     /* /ws?session_id=: attach the asker's WebSocket */
  SV_FWD_CALL,       /* a call (`kind`) of that attached WebSocket */
  SV_FWD_DETACH,     /* the attached WebSocket is gone; the session
                        stays */
  SV_FWD_END,        /* the attached WebSocket was closed by its server:
                        the session closes too */
  SV_FWD_EVICT,      /* the asker took slots of our idle HTTP sessions
                        (reclaim.c): close that many */
  /* answering: to the asker */
  SV_FWD_ANSWER,     /* status, refusal, sess_kind, data */
  SV_FWD_WS_CLOSE    /* the owner ends the attachment: close the
                        WebSocket with code `status`, reason data */
};

/* An answer's refusal: the owner's drain dropped an attached WebSocket's
 * call that waited behind another client's (as a local client's queued
 * messages are dropped): no reply; the asker stops waiting for it. */
#define SV_FWD_DROPPED (-1)

struct sv_fwd_s {
  sv_fwd_t *next;
  int op;                   /* SV_FWD_* */
  unsigned from;            /* the sending worker */
  uint64_t seq;             /* the asker's proxy */
  int kind;                 /* LUDO__CALL_* of a call */
  int status;               /* an answer's: 0 or the LUDO_E* of the call */
  int refusal;              /* an answer's: 0, or the HTTP status or
                               JSON-RPC code the request was refused with
                               (text: data), or SV_FWD_DROPPED */
  int sess_kind;            /* an answer's: SV_SESS_* of the session */
  uint32_t wall_ms;         /* an HTTP call's wall limit (wall_ms of the
                               session record), 0: none */
  char id[48];              /* the session's id */
  size_t len;
  char data[];              /* input, result or text; NUL-terminated */
};

struct ludo__serve_s {
  ludo_runtime_t *rt;
  ludo_env_t *env;
  ludo__core_t *core;
  ludo_server_options_t o;
  char *token;              /* owned copy, or NULL */
  ludo__serve_shared_t own, *shared;
  ludo__server_t *http;
  ludo__ws_options_t wso;
  json_t *info;             /* the environment's description */
  ludo__buf_t wrap;         /* scratch: a /ws reply being put together */
  sv_sess_t *sessions;
  sv_sess_t *buckets[SV_BUCKETS];
  unsigned nsessions;
  sv_ws_t *clients;
  sv_batch_t *batches;      /* POST /mcp batches being answered (mcp.c) */
  uv_timer_t reaper;
  int reaper_on;
  int closing, http_closed, reaper_closed;
  int loopback;             /* listening on a loopback address only */
  uv_timer_t drain;         /* bounds the drain of ludo__serve_close */
  int draining, drain_on, drain_closed;
  /* Workers (forward.c): the group, this server's index, its inbox. */
  ludo__serve_group_t *group;
  unsigned worker;
  ludo__worker_metrics_t *wm;  /* its share of the metrics, or NULL */
  uv_async_t inbox;
  int inbox_on, inbox_closed, joined;
  sv_sess_t *proxies[SV_PROXY_BUCKETS];
  unsigned nproxies;
  uint64_t next_seq;
  /* reclaim.c: the sessions that may give way, and the ids of the last
   * ones that did. */
  sv_sess_t *lru_head, *lru_tail;
  unsigned nlisted;
  char evicted[SV_EVICTED_KEEP][48];
  unsigned evicted_at;
  void (*close_cb)(void *ud);
  void *close_ud;
  ludo__closer_t closer;    /* ludo_runtime_free closes the server */
  int holding;              /* serve_closer runs: sv is not freed yet */
  char errmsg[256];
};

/* ---- serve.c: sessions ------------------------------------------------ */

/* Makes a session record of `kind` and starts opening its session;
 * `done(x, status, ...)` runs when the open completes (status 0: x->s is
 * ready). Returns the record, or NULL with *why set: LUDO_EBUSY when the
 * server is at capacity, LUDO_ECLOSED when it is closing, LUDO_ENOMEM. */
sv_sess_t *sv_sess_open(ludo__serve_t *sv, int kind, sv_done_fn done,
                        int *why);

/* Starts call `kind` (LUDO__CALL_*) with input json/len on the open,
 * idle session x; `done` runs with its result. Returns 0 or a LUDO_E*
 * code (then `done` never runs). */
int sv_sess_call(sv_sess_t *x, int kind, const char *json, size_t len,
                 sv_done_fn done);

/* Closes the session and frees the record (now, or when its call
 * completes). Idempotent. */
void sv_sess_close(sv_sess_t *x);

/* Gives the capacity slot of x back now when x is a session made for one
 * request (SV_SESS_EPHEMERAL), whose close comes after its answer: call
 * it before the answer goes out, so that a client that read the answer
 * and asks for a session at once, on any worker, finds the slot free.
 * sv_sess_close does not give it twice. Does nothing for other kinds. */
void sv_sess_release_slot(sv_sess_t *x);

/* The record of session `id`, or NULL. */
sv_sess_t *sv_sess_find(ludo__serve_t *sv, const char *id);

/* Microseconds of a monotonic clock; milliseconds of the loop's clock. */
uint64_t sv_now_us(void);
uint64_t sv_now_ms(ludo__serve_t *sv);

/* Frees the server when it is closing and nothing is left. */
void sv_maybe_finish(ludo__serve_t *sv);
/* During ludo__serve_close's drain: ends it, from the loop, once no call
 * is in flight. */
void sv_drain_check(ludo__serve_t *sv);

/* Sessions open, as reports give it (never above the maximum). */
unsigned sv_active_sessions(ludo__serve_t *sv);

/* The capacity error text: "Server at capacity: N/M sessions active.
 * Cannot accept new connections." into buf. */
void sv_capacity_text(ludo__serve_t *sv, char *buf, size_t n);

/* Detaches the session from its WebSocket, which went away: an attached
 * session (?session_id=) outlives the socket. */
void sv_sess_detach(sv_sess_t *x);

/* ---- reclaim.c: idle HTTP sessions give way at capacity -------------- */

/* Puts x on the server's list of sessions that give way, when it is an
 * HTTP session (POST /reset), open, idle, with no WebSocket attached, and
 * the server is not closing; else does nothing. Call it whenever one of
 * these may have become true: a call ended, a WebSocket left. */
void sv_reclaim_note(sv_sess_t *x);

/* Takes x off the list before a call or an attachment. Returns 0 (it may
 * be used), or -1 when its slot had been given to a newcomer of another
 * worker meanwhile: x is closed then (its id answers as one closed to
 * make room), and the caller answers as for an unknown session. */
int sv_reclaim_take(sv_sess_t *x);

/* Takes x off the list as it closes: its slot goes back to the count, or
 * pays what the server owes (a slot it gave already). */
void sv_reclaim_drop(sv_sess_t *x);

/* At capacity: closes the least recently used idle HTTP session of this
 * worker, or takes one of another worker's (which closes it when its loop
 * gets the message), and returns 1: its slot is the caller's now, already
 * counted. 0 when none may give way. */
int sv_reclaim_slot(ludo__serve_t *sv);

/* Closes as many listed sessions as other workers took slots of
 * (SV_FWD_EVICT, the reaper). */
void sv_reclaim_pay(ludo__serve_t *sv);

/* The text of the refusal for session `id` that is not there: "Unknown
 * session_id: ID", saying when it was closed to make room. */
void sv_unknown_text(ludo__serve_t *sv, const char *id, char *msg, size_t n);

/* ---- group.c: the workers' shared state and inboxes ------------------- */

/* The number of servers the group was made for. */
unsigned sv_group_size(const ludo__serve_group_t *g);

/* The count and metrics the group's servers share. Borrowed until
 * ludo__serve_group_free. */
ludo__serve_shared_t *sv_group_shared(ludo__serve_group_t *g);

/* A message with `len` bytes of data (copied, NUL added), its other
 * fields zero; NULL when out of memory. */
sv_fwd_t *sv_fwd_new(const char *data, size_t len);
void sv_fwd_free(sv_fwd_t *m);

/* Takes worker index `worker` for a server whose inbox wakes `a` (a
 * uv_async_t on its loop). Returns 0, or LUDO_EINVAL when the index is out
 * of range or taken. */
int sv_group_join(ludo__serve_group_t *g, unsigned worker, uv_async_t *a);

/* Queues m for worker `to` and wakes its loop: 0 (the inbox owns m now),
 * or LUDO_ECLOSED when no server takes messages there (m stays the
 * caller's). Any thread. */
int sv_group_post(ludo__serve_group_t *g, unsigned to, sv_fwd_t *m);

/* The messages queued for `worker`, in order (the caller frees them). */
sv_fwd_t *sv_group_take(ludo__serve_group_t *g, unsigned worker);

/* Stops taking messages for `worker` (later posts fail) and gives back
 * the index; returns the messages still queued (the caller frees them).
 * The caller closes its async handle after. */
sv_fwd_t *sv_group_leave(ludo__serve_group_t *g, unsigned worker);

/* ---- forward.c: named sessions and other workers --------------------- */

/* The checks of a reset/step/state on session `id` named by an HTTP
 * request (X-Session-Id): 0 with *out the record, or the HTTP status of
 * the refusal (404: no such session; 409: attached to a WebSocket, or
 * busy) with its text in msg. */
int sv_check_http(ludo__serve_t *sv, const char *id, sv_sess_t **out,
                  char *msg, size_t n);

/* The same for a JSON-RPC tools/call with session_id: 0, or the JSON-RPC
 * code of the refusal (-32602 unknown, -32600 attached to a WebSocket, or
 * busy). */
int sv_check_tool(ludo__serve_t *sv, const char *id, sv_sess_t **out,
                  char *msg, size_t n);

/* The checks of /ws?session_id=: 0 with *out the record, or -1 with the
 * text of the SESSION_ERROR in msg (unknown, still initializing, attached
 * already). */
int sv_check_attach(ludo__serve_t *sv, const char *id, sv_sess_t **out,
                    char *msg, size_t n);

/* openenv/session/close of session `id` (not the requester's own): closes
 * it, or its attached WebSocket, and returns 0 with the result's JSON in
 * *result (caller frees with free()); or returns the JSON-RPC code of the
 * refusal with its text in msg. */
int sv_close_named(ludo__serve_t *sv, const char *id, char **result,
                   char *msg, size_t n);

/* The following return 0 when `id` names no session of another worker
 * (the caller goes on locally), and 1 when they took the request: passed
 * to the worker that owns the session (the answer comes from the loop),
 * or answered already (that worker is gone). */

/* X-Session-Id: call `kind` with input json/len (copied) and the wall
 * limit wall_ms (sv_sess_t.wall_ms); the answer goes
 * through `done` (the caller's continuation, run on a proxy whose req,
 * kind, id, call and t0_us are set as on a session of ours), a refusal
 * as {"detail": text} with its status. */
int sv_fwd_http(ludo__serve_t *sv, ludo__http_req_t *req, const char *id,
                int kind, const char *json, size_t len, uint32_t wall_ms,
                sv_done_fn done);

/* tools/call with session_id: the call json/len (copied); the answer
 * through `done` on a proxy holding the request's context (req, ws,
 * rpc_ws, rpc_id: a new reference), a refusal as a JSON-RPC error. */
int sv_fwd_tool(ludo__serve_t *sv, ludo__http_req_t *req, sv_ws_t *ws,
                int rpc_ws, json_t *rpc_id, const char *id,
                const char *json, size_t len, sv_done_fn done);

/* openenv/session/close of `id`; `bound` is the requester's own session
 * (NULL: none), which it may not close. */
int sv_fwd_close(ludo__serve_t *sv, sv_sess_t *bound, ludo__http_req_t *req,
                 sv_ws_t *ws, int rpc_ws, json_t *rpc_id, const char *id);

/* /ws?session_id=: attaches client c to the session through a proxy,
 * which forwards its calls from then on; a refusal is a SESSION_ERROR
 * frame and the close, as for a session of ours. */
int sv_fwd_attach(sv_ws_t *c, const char *id);

/* serve.c's record functions on a proxy: a call (the rules of
 * sv_sess_call), a close (the session closes on its worker too, as an
 * attached session closes with its WebSocket's close by the server), a
 * detach (the session stays). */
int sv_proxy_call(sv_sess_t *x, int kind, const char *json, size_t len,
                  sv_done_fn done);
void sv_proxy_close(sv_sess_t *x);
void sv_proxy_detach(sv_sess_t *x);

/* Ends a remote record: the session it is attached to closes, and the worker with
 * the WebSocket closes that with `code` and `reason`. Frees c. */
void sv_remote_close(sv_ws_t *c, int code, const char *reason);

/* Runs remote record c's waiting call if its session is free now. */
void sv_remote_pump(sv_ws_t *c);

/* Joins the group (o->group, o->worker) and starts taking messages.
 * Returns 0, or LUDO_EINVAL with sv->errmsg set. */
int sv_fwd_start(ludo__serve_t *sv);

/* Stops taking messages: refuses those queued, cancels the proxies
 * waiting for answers, closes the inbox (then sv->inbox_closed, and
 * sv_maybe_finish). */
void sv_fwd_stop(ludo__serve_t *sv);

/* ---- routes.c: HTTP ------------------------------------------------- */

/* Routes one HTTP request (auth already checked). */
void sv_route(ludo__serve_t *sv, ludo__http_req_t *req);

/* Answers req (ludo__http_respond); once the server is stopping, the
 * answer also ends the connection (Connection: close). */
void sv_respond(ludo__serve_t *sv, ludo__http_req_t *req, int status,
                const ludo__http_header_t *h, size_t n, const void *body,
                size_t len);

/* Answers with a JSON body (copied) and `status`; extra header fields
 * h/n. Counts the bytes. */
void sv_respond_json(ludo__serve_t *sv, ludo__http_req_t *req, int status,
                     const char *body, size_t len,
                     const ludo__http_header_t *h, size_t n);

/* Answers 405 {"detail":"Method Not Allowed"} with the Allow field
 * (RFC 9110 15.5.6): the methods of the path, `allow`. */
void sv_respond_405(ludo__serve_t *sv, ludo__http_req_t *req,
                    const char *allow);

/* Answers {"detail": msg} with `status`. */
void sv_respond_detail(ludo__serve_t *sv, ludo__http_req_t *req, int status,
                       const char *msg);

/* ---- tasks.c: OpenEnv's Task API ------------------------------------ */

/* Answers `req` when its path is one of the Task API's (OPENENV.md 1.9):
 * /list_environments or /{env_name}/{splits,tasks,num_tasks,task,
 * task_range}, in either mode. Returns 1 when it answered (or holds the
 * request until its throwaway session has run the call), 0 when the path
 * is none of them (the request untouched). */
int sv_tasks_route(ludo__serve_t *sv, ludo__http_req_t *req);

/* Adds the Task API's operations to `paths`, the "paths" object of
 * /openapi.json. */
void sv_tasks_openapi(ludo__serve_t *sv, json_t *paths);

/* ---- wsproto.c: WebSockets ------------------------------------------ */

/* Accepts an upgrade on /ws (mcp 0) or /mcp (mcp 1). */
void sv_ws_accept(ludo__serve_t *sv, ludo__http_req_t *req, int mcp);

/* Sends a text frame (copied); counts the bytes. */
void sv_ws_send(sv_ws_t *c, const char *data, size_t len);

/* Sends an OpenEnv error frame {"type":"error","data":{"message",
 * "code", ...}}; `extra` (taken; may be NULL) is an object whose fields
 * are added to data. */
void sv_ws_error(sv_ws_t *c, const char *code, const char *message,
                 json_t *extra);

/* Handles the messages a client sent while its session was busy (a
 * remote record: runs its waiting call, sv_remote_pump). Called when the
 * client's session may have become free. */
void sv_ws_pump(sv_ws_t *c);

/* Closes the client's WebSocket with `code`; the session goes with it. */
void sv_ws_close(sv_ws_t *c, int code, const char *reason);

/* Ends every client (server closing): 1001. */
void sv_ws_close_all(ludo__serve_t *sv);

/* ---- wsscan.c: the fields of a /ws message ---------------------------- */

/* What a common /ws message holds (sv_wsmsg_scan). */
typedef struct sv_wsmsg_s {
  char type[16];        /* the "type" string, NUL-terminated */
  int has_data;         /* a "data" member is present (an object or null) */
  int data_object;      /* ... and it is an object: */
  size_t data_at;       /* its bytes in the message: from data_at, */
  size_t data_len;      /* data_len of them ('{' to '}') */
} sv_wsmsg_t;

/* Scans the /ws message `text`/`len` (borrowed) with the streaming JSON
 * parser. Returns 1 when it has the common shape, and fills *m: a JSON
 * object starting at its first byte, whose members are "type", a string
 * of 1 to 15 bytes, and optionally "data", an object or null, each at most
 * once, with no NUL (\u0000) in any string or key. Returns 0 for any
 * other text, valid or not: the caller then decodes it with jansson and
 * answers as OpenEnv does. Never allocates. */
int sv_wsmsg_scan(const char *text, size_t len, sv_wsmsg_t *m);

/* ---- bodyscan.c: the fields of a POST /step or /reset body ----------- */

/* What a body of the common shape holds (sv_body_scan). */
typedef struct sv_body_s {
  size_t action_at;      /* a step's action object: its bytes in the */
  size_t action_len;     /* body, from action_at, action_len of them */
  double timeout_s;      /* a step's timeout_s, > 0; 0: none */
  int has_session_id;    /* a step's session_id string is present: */
  char session_id[64];   /* ... NUL-terminated */
} sv_body_t;

/* Scans the body `text`/`len` (borrowed) of POST /step (reset 0) or POST
 * /reset (reset 1) with the streaming JSON parser, building no tree.
 * Returns 1 when it has the common shape and every field it checks is
 * valid, and fills *b: a JSON object starting at its first byte, each of
 * these members at most once: for a step "action" (an object, required),
 * "timeout_s" (a number > 0, or null), "request_id" (a string of at most
 * 255 characters, or null) and "session_id" (a string shorter than 64
 * bytes without NUL, or null); for a reset "seed" (an integer >= 0, or
 * null) and "episode_id" (as request_id), and no "session_id"; any other
 * member, of any value; no \u0000 in any key. Returns 0 for any other
 * text, valid or not: the caller then decodes it with jansson, which
 * answers it as before. Reset options sent over /ws are checked with it
 * too (wsproto.c). `heap` lends the buffer for strings with escapes
 * (freed before it returns). */
int sv_body_scan(ludo__alloc_t *heap, const char *text, size_t len,
                 int reset, sv_body_t *b);

/* ---- resetcheck.c: OpenEnv's ResetRequest ----------------------------- */

/* ResetRequest's checks of a reset's options `opts` (a JSON object,
 * borrowed), for POST /reset and /ws reset alike: seed an integer >= 0
 * or null, episode_id a string of at most 255 characters or null. The
 * "errors" list of the first failure, pydantic's shape, loc [prefix,
 * field] ("body" over HTTP, "data" over /ws), as a new reference; NULL
 * when they pass. */
json_t *sv_reset_errors(json_t *opts, const char *prefix);

/* One pydantic-style error entry in a list: [{type, loc: [prefix,
 * field], msg, input}] (field NULL: loc [prefix]; input borrowed, NULL:
 * null). New reference. */
json_t *sv_field_error(const char *type, const char *prefix,
                       const char *field, const char *msg, json_t *input);

/* ---- jsonload.c: a client's JSON ------------------------------------- */

/* Decodes the client's text `text`/`len` (borrowed) as jansson's
 * json_loadb with JSON_ALLOW_NUL | JSON_DECODE_ANY does, but a text that
 * is not JSON, or holds more than SV_JSON_MAX_VALUES values, is refused
 * after one pass of the streaming parser, in time linear in its length
 * and without building a tree. Returns a new
 * reference, or NULL with *err filled in (text, position, line,
 * column). */
json_t *sv_json_load(ludo__serve_t *sv, const char *text, size_t len,
                     json_error_t *err);

/* The most values (scalars, objects and arrays) sv_json_load decodes in
 * one text: jansson's tree of a value costs about a microsecond, on the
 * loop and under no CPU budget (measured: 100,000 objects, or 100,000
 * keys with their values, take 0.12-0.2 s of CPU to build, dump and
 * free). */
#define SV_JSON_MAX_VALUES 100000

/* When the JSON text `text`/`len` (borrowed) holds a number out of
 * ludo's range (an integer beyond 64 bits, a real beyond the double
 * range: valid JSON that docs/json.md refuses), the pydantic-style error
 * entry naming it: {"type":"value_error","loc":[prefix, keys and indexes
 * to the number],"msg","input":null} (prefix NULL: none); when it holds
 * more than SV_JSON_MAX_VALUES values before any such number, the entry
 * {"type":"value_error","loc":[prefix],"msg":"more than 100000 JSON
 * values: ...","input":null}. NULL for any other text (call it after
 * sv_json_load refused the text). New reference. */
json_t *sv_json_limit_error(ludo__serve_t *sv, const char *text, size_t len,
                            const char *prefix);

/* ---- mcp.c: JSON-RPC ------------------------------------------------ */

/* Handles the JSON-RPC text `data`/`len` for session x (NULL: none bound,
 * as POST /mcp), answering through `req` (HTTP) or `ws` (rpc_ws 1: raw
 * frame, 2: OpenEnv mcp frame). A batch (an array, POST /mcp and WS /mcp
 * only) runs its members one at a time; on WS /mcp, ws->batch is set
 * until its array has gone. */
void sv_mcp_handle(ludo__serve_t *sv, sv_sess_t *x, ludo__http_req_t *req,
                   sv_ws_t *ws, int rpc_ws, const char *data, size_t len);

/* Frees a WebSocket's batch (b may be NULL): the client is gone, and so
 * is any reply still to come of the member that runs. */
void sv_mcp_batch_free(sv_batch_t *b);

/* The HTTP request `req` was aborted: frees the batch it carried, if
 * any (the session call of the member that runs answers nobody). */
void sv_mcp_abort(ludo__serve_t *sv, ludo__http_req_t *req);

/* 1 when ludo speaks MCP protocol version v ("2025-06-18"). */
int sv_mcp_version_known(const char *v);

/* Answers a JSON-RPC request whose session record is x (x->req or x->ws,
 * x->rpc_id): with a result (JSON text) or an error. */
void sv_rpc_reply(ludo__serve_t *sv, ludo__http_req_t *req, sv_ws_t *ws,
                  int rpc_ws, json_t *id, const char *result, size_t len);
void sv_rpc_error(ludo__serve_t *sv, ludo__http_req_t *req, sv_ws_t *ws,
                  int rpc_ws, json_t *id, int code, const char *message,
                  json_t *data);

/* ---- wire helpers (routes.c) ----------------------------------------- */

/* Percent-decodes the n bytes at p into out (at most size - 1 bytes, then
 * NUL), as Starlette decodes a path parameter (plus 0) or a query value
 * (plus 1: '+' is a space): an escape that is not two hex digits stays as
 * it is. Returns 0, or -1 when it does not fit or decodes to a NUL byte
 * (no name or id has one). */
int sv_unescape(const char *p, size_t n, int plus, char *out, size_t size);

/* The value of `key` in the query string q (NULL: none), percent-decoded
 * into buf (sv_unescape); NULL when absent. A value that does not decode
 * (longer than buf, or holding a NUL) is given as sent, cut to fit: with
 * buf of 64 bytes it then names no session (ids are shorter than 48 bytes
 * and hold no '%'), so a request naming one is refused as for an unknown
 * id, as the X-Session-Id header and the body's session_id are. */
const char *sv_query_value(const char *q, const char *key, char *buf,
                           size_t n);

/* A JSON string of the `n` bytes at `s` (n (size_t)-1: up to the NUL),
 * any byte that is not valid UTF-8 replaced by U+FFFD: error messages
 * carry text from Lua and from clients, and a frame or body must stay
 * valid UTF-8 JSON. New reference; NULL only when out of memory. */
json_t *sv_jstr(const char *s, size_t n);

/* The "errors" list of a VALIDATION_ERROR / 422 for the ludo error text
 * `msg` ("ESCHEMA: action.tags[0]: expected string, got number"): a
 * jansson array with one pydantic-style entry {type, loc, msg, input}.
 * `prefix` is prepended to loc (NULL: none). New reference. */
json_t *sv_validation_errors(const char *msg, size_t len,
                             const char *prefix);

#endif
