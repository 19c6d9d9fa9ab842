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
#define SV_WS_QUEUE_MAX 64    /* messages a client may send ahead */
#define SV_WRAP_KEEP 65536    /* scratch for /ws replies kept between uses */

typedef struct sv_sess_s sv_sess_t;
typedef struct sv_ws_s sv_ws_t;

/* How a session came to be, which decides its idle timeout and who may
 * close it. */
enum { SV_SESS_WS = 1, SV_SESS_MCP_WS, SV_SESS_HTTP, SV_SESS_MCP,
       SV_SESS_EPHEMERAL };

/* Called when a session's open or call completes: status 0 or a LUDO_E*
 * code, data/len the result or error text (borrowed). */
typedef void (*sv_done_fn)(sv_sess_t *x, int status, const char *data,
                           size_t len);

struct sv_sess_s {
  ludo__serve_t *sv;
  ludo_session_t *s;        /* NULL while opening */
  char id[48];
  int kind;                 /* SV_SESS_* */
  sv_ws_t *ws;              /* the WebSocket it belongs to, or NULL */
  uint64_t last_ms;         /* last reset, step or tool call */
  int opening, busy;        /* an open or a call in flight */
  int dead;                 /* closed (or closing): no new calls */
  int in_cb, in_close;      /* inside its continuation / its close: the
                               record is freed by whoever returns last */
  sv_done_fn done;          /* the continuation of the open or call */
  /* The continuation's context (one call at a time per session). */
  int call;                 /* LUDO__CALL_* in flight */
  ludo__http_req_t *req;    /* HTTP request to answer, or NULL */
  json_t *rpc_id;           /* JSON-RPC id of the request, or NULL */
  int rpc_ws;               /* answer JSON-RPC on ws (1: raw, 2: in an
                               OpenEnv {"type":"mcp"} frame) */
  char *pending;            /* input of a call waiting for the open */
  size_t pending_len;
  uint64_t t0_us;           /* when the call's message arrived */
  sv_sess_t *next, *prev;   /* all sessions */
  sv_sess_t *hnext;         /* hash chain */
};

struct sv_ws_s {
  ludo__serve_t *sv;
  ludo__ws_t *ws;           /* NULL once closed */
  int mcp;                  /* WS /mcp: raw JSON-RPC frames */
  sv_sess_t *sess;          /* its session (NULL before it opens) */
  int closing;              /* a close frame was sent */
  /* Messages that came while the session was busy or opening. */
  struct sv_msg_s *head, *tail;
  unsigned queued;
  sv_ws_t *next, *prev;     /* all clients */
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
  uv_timer_t reaper;
  int reaper_on;
  int closing, http_closed, reaper_closed;
  void (*close_cb)(void *ud);
  void *close_ud;
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

/* The record of session `id`, or NULL. */
sv_sess_t *sv_sess_find(ludo__serve_t *sv, const char *id);

/* Microseconds of a monotonic clock; milliseconds of the loop's clock. */
uint64_t sv_now_us(void);
uint64_t sv_now_ms(ludo__serve_t *sv);

/* Frees the server when it is closing and nothing is left. */
void sv_maybe_finish(ludo__serve_t *sv);

/* The capacity error text: "Server at capacity: N/M sessions active.
 * Cannot accept new connections." into buf. */
void sv_capacity_text(ludo__serve_t *sv, char *buf, size_t n);

/* ---- routes.c: HTTP ------------------------------------------------- */

/* Routes one HTTP request (auth already checked). */
void sv_route(ludo__serve_t *sv, ludo__http_req_t *req);

/* Answers with a JSON body (copied) and `status`; extra header fields
 * h/n. Counts the bytes. */
void sv_respond_json(ludo__serve_t *sv, ludo__http_req_t *req, int status,
                     const char *body, size_t len,
                     const ludo__http_header_t *h, size_t n);

/* Answers {"detail": msg} with `status`. */
void sv_respond_detail(ludo__serve_t *sv, ludo__http_req_t *req, int status,
                       const char *msg);

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

/* Handles the messages a client sent while its session was busy. */
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

/* ---- mcp.c: JSON-RPC ------------------------------------------------ */

/* Handles the JSON-RPC text `data`/`len` for session x (NULL: none bound,
 * as POST /mcp), answering through `req` (HTTP) or `ws` (rpc_ws 1: raw
 * frame, 2: OpenEnv mcp frame). */
void sv_mcp_handle(ludo__serve_t *sv, sv_sess_t *x, ludo__http_req_t *req,
                   sv_ws_t *ws, int rpc_ws, const char *data, size_t len);

/* Answers a JSON-RPC request whose session record is x (x->req or x->ws,
 * x->rpc_id): with a result (JSON text) or an error. */
void sv_rpc_reply(ludo__serve_t *sv, ludo__http_req_t *req, sv_ws_t *ws,
                  int rpc_ws, json_t *id, const char *result, size_t len);
void sv_rpc_error(ludo__serve_t *sv, ludo__http_req_t *req, sv_ws_t *ws,
                  int rpc_ws, json_t *id, int code, const char *message,
                  json_t *data);

/* ---- wire helpers (routes.c) ----------------------------------------- */

/* The "errors" list of a VALIDATION_ERROR / 422 for the ludo error text
 * `msg` ("ESCHEMA: action.tags[0]: expected string, got number"): a
 * jansson array with one pydantic-style entry {type, loc, msg, input}.
 * `prefix` is prepended to loc (NULL: none). New reference. */
json_t *sv_validation_errors(const char *msg, size_t len,
                             const char *prefix);

#endif
