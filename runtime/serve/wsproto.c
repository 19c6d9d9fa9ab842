/* wsproto.c - the server's WebSockets: OpenEnv's session protocol on /ws
 * (reset, step, state, close and mcp frames, one reply per request in
 * order, OpenEnv's error codes and close behaviour) and raw JSON-RPC on
 * /mcp. A client owns one session, opened when it connects (or the one
 * named by ?session_id=, made by openenv/session/create). Messages that
 * come while the session opens or runs a call wait, in order. */
#include "serve/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sv_msg_s {
  struct sv_msg_s *next;
  uint64_t t0_us; /* arrival */
  size_t len;
  char data[];
} sv_msg_t;

void sv_ws_send(sv_ws_t *c, const char *data, size_t len) {
  int rc;
  if (c->ws == NULL || c->closing) return;
  rc = ludo__ws_send(c->ws, 0, data, len);
  if (rc == 0) {
    atomic_fetch_add(&c->sv->shared->metrics.bytes_out, len);
  } else if (rc == LUDO_EBUSY) {
    /* More than the connection's queue (max_queued, 32 MiB) of replies
     * wait unread: a reply cannot be dropped and the client still wait
     * for it, so the connection ends, saying why, after what is queued. */
    static const char why[] = "the client does not read its replies";
    ludo__ws_close(c->ws, 1008, why);
  }
}

/* Sends the JSON of `v` (taken). */
static void send_value(sv_ws_t *c, json_t *v) {
  char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
  if (text != NULL) {
    sv_ws_send(c, text, strlen(text));
    free(text);
  }
  json_decref(v);
}

static int proto_code(const char *code) {
  static const char *const names[] = {
      "INVALID_JSON", "UNKNOWN_TYPE", "VALIDATION_ERROR", "EXECUTION_ERROR",
      "CAPACITY_REACHED", "FACTORY_ERROR", "SESSION_ERROR"};
  int i;
  for (i = 0; i < 7; i++)
    if (strcmp(names[i], code) == 0) return i;
  return -1;
}

void sv_ws_error(sv_ws_t *c, const char *code, const char *message,
                 json_t *extra) {
  json_t *data;
  if (c->mcp) { /* WS /mcp speaks JSON-RPC only: a server error, id null */
    json_t *d = json_pack("{s:s}", "code", code);
    if (d && extra) json_object_update(d, extra);
    json_decref(extra);
    sv_rpc_error(c->sv, NULL, c, 1, NULL, -32000, message, d);
    return;
  }
  data = json_pack("{s:o,s:s}", "message", sv_jstr(message, (size_t)-1),
                   "code", code);
  if (strcmp(code, "CAPACITY_REACHED") != 0) /* sv_sess_open counted it */
    ludo__metrics_proto(&c->sv->shared->metrics, proto_code(code));
  if (data && extra) json_object_update(data, extra);
  json_decref(extra);
  send_value(c, json_pack("{s:s,s:o}", "type", "error", "data", data));
}

void sv_ws_close(sv_ws_t *c, int code, const char *reason) {
  if (c->remote_from) { /* another worker's WebSocket (forward.c) */
    sv_remote_close(c, code, reason);
    return;
  }
  if (c->closing) return;
  c->closing = 1;
  if (c->sess) {
    sv_sess_t *x = c->sess;
    c->sess = NULL;
    sv_sess_close(x);
  }
  if (c->ws) ludo__ws_close(c->ws, code, reason);
}

/* 1 when x was attached by ?session_id= (made by openenv/session/create
 * or POST /reset): such a session outlives its WebSocket. */
static int attached(const sv_sess_t *x) {
  return x->kind == SV_SESS_MCP || x->kind == SV_SESS_HTTP;
}

/* Ends the connection after refusing what the client sent (a
 * SESSION_ERROR): its own session closes with it, but a session it
 * attached to stays for its next client (OPENENV.md 1.4), as when the
 * client leaves by itself. */
static void ws_refuse(sv_ws_t *c, int code, const char *reason) {
  sv_sess_t *x = c->sess;
  if (x != NULL && !c->closing && attached(x)) {
    c->sess = NULL;
    sv_sess_detach(x);
  }
  sv_ws_close(c, code, reason);
}

void sv_ws_close_all(ludo__serve_t *sv) {
  sv_ws_t *c, *next;
  for (c = sv->clients; c; c = next) {
    next = c->next; /* a remote record is freed at once */
    sv_ws_close(c, 1001, "server shutting down");
  }
}

/* ---- replies ---------------------------------------------------------- */

/* Wraps a result as {"type":T,"data":RESULT} and sends it. The text is
 * put together in the server's scratch buffer (the WebSocket copies it),
 * which keeps its memory unless it grew past SV_WRAP_KEEP bytes. */
static void send_wrapped(sv_ws_t *c, const char *type, const char *data,
                         size_t len) {
  ludo__buf_t *b = &c->sv->wrap;
  size_t tlen = strlen(type);
  ludo__buf_reset(b);
  if (ludo__buf_reserve(b, tlen + len + 20) == 0) {
    memcpy(b->p, "{\"type\":\"", 9);
    memcpy(b->p + 9, type, tlen);
    memcpy(b->p + 9 + tlen, "\",\"data\":", 9);
    memcpy(b->p + 18 + tlen, data, len);
    b->p[18 + tlen + len] = '}';
    b->len = 19 + tlen + len;
    sv_ws_send(c, b->p, b->len);
  }
  if (b->cap > SV_WRAP_KEEP) ludo__buf_free(b);
}

/* The continuation of a reset, step or state of a /ws client. */
static void ws_done(sv_sess_t *x, int status, const char *data,
                    size_t len) {
  ludo__serve_t *sv = x->sv;
  sv_ws_t *c = x->caller;
  x->caller = NULL;
  if (c == NULL || c->closing) return;
  if (status == 0) {
    if (x->call == LUDO__CALL_STATE) {
      send_wrapped(c, "state", data, len);
    } else {
      if (x->call == LUDO__CALL_STEP)
        ludo__metrics_step(&sv->shared->metrics, sv_now_us() - x->t0_us);
      else
        atomic_fetch_add(&sv->shared->metrics.resets, 1);
      send_wrapped(c, "observation", data, len);
    }
  } else if (status == LUDO_ESCHEMA) {
    sv_ws_error(c, "VALIDATION_ERROR", "Invalid message",
                json_pack("{s:o}", "errors",
                          sv_validation_errors(data, len, NULL)));
  } else if (sv->closing && status == LUDO_ECANCELED) {
    /* Cancelled by the stop (ludo serve interrupts the calls left when
     * the drain ends): the server goes away, as for the others. */
    sv_ws_close(c, 1001, "server shutting down");
    return;
  } else if (status == LUDO_ECLOSED || status == LUDO_ECANCELED) {
    sv_ws_error(c, "SESSION_ERROR", "the session was closed", NULL);
    sv_ws_close(c, 1000, NULL);
    return;
  } else {
    char *msg = strndup(data, len);
    sv_ws_error(c, "EXECUTION_ERROR", msg ? msg : "the call failed", NULL);
    free(msg);
  }
  sv_ws_pump(c);
}

/* ---- /ws messages ------------------------------------------------------ */

/* VALIDATION_ERROR for a message field: type `type`, loc [field]. */
static void invalid_field(sv_ws_t *c, const char *type, const char *field,
                          const char *msg, json_t *input) {
  sv_ws_error(c, "VALIDATION_ERROR", "Invalid message",
              json_pack("{s:[{s:s,s:[s],s:s,s:O}]}", "errors", "type", type,
                        "loc", field, "msg", msg, "input",
                        input ? input : json_null()));
}

/* Refuses fields of `m` other than "type" and `also` (NULL: none). */
static int extra_fields(sv_ws_t *c, json_t *m, const char *also) {
  const char *k;
  json_t *v;
  json_object_foreach(m, k, v) {
    if (strcmp(k, "type") == 0 || (also && strcmp(k, also) == 0)) continue;
    invalid_field(c, "extra_forbidden", k, "Extra inputs are not permitted",
                  v);
    return 1;
  }
  return 0;
}

/* Starts call `kind` on the client's session with the JSON text
 * `text`/`len` (copied; NULL: no input). */
static void start_call(sv_ws_t *c, int kind, const char *text, size_t len,
                       uint64_t t0) {
  sv_sess_t *x = c->sess;
  x->t0_us = t0;
  x->caller = c;
  if (sv_sess_call(x, kind, text, len, ws_done) != 0) {
    x->caller = NULL;
    sv_ws_error(c, "EXECUTION_ERROR", "the call could not start", NULL);
  }
}

/* Starts call `kind` with the JSON of `data` (NULL: no input). */
static void start_call_value(sv_ws_t *c, int kind, json_t *data,
                             uint64_t t0) {
  char *text = data ? json_dumps(data, JSON_COMPACT) : NULL;
  start_call(c, kind, text, text ? strlen(text) : 0, t0);
  free(text);
}

/* A message of the common shape (sv_wsmsg_scan), handled from the scan:
 * "data" goes to the session as the bytes the client sent. Returns 0,
 * having done nothing, when the message needs the full path (an error to
 * report, a type to name). */
static int ws_message_fast(sv_ws_t *c, const char *text, uint64_t t0,
                           const sv_wsmsg_t *f) {
  const char *data = f->data_object ? text + f->data_at : NULL;
  size_t len = f->data_object ? f->data_len : 0;
  if (strcmp(f->type, "step") == 0) {
    if (!f->data_object) return 0;
    start_call(c, LUDO__CALL_STEP, data, len, t0);
  } else if (strcmp(f->type, "reset") == 0) {
    sv_body_t b; /* ResetRequest's fields checked as over HTTP */
    if (f->data_object &&
        !sv_body_scan(&c->sv->core->heap, data, len, 1, &b))
      return 0;
    start_call(c, LUDO__CALL_RESET, data, len, t0);
  } else if (strcmp(f->type, "state") == 0) {
    if (f->has_data) return 0;
    start_call(c, LUDO__CALL_STATE, NULL, 0, t0);
  } else if (strcmp(f->type, "close") == 0) {
    if (f->has_data) return 0;
    sv_ws_close(c, 1000, NULL);
  } else if (strcmp(f->type, "mcp") == 0) {
    if (!f->data_object) return 0;
    sv_mcp_handle(c->sv, c->sess, NULL, c, 2, data, len);
  } else {
    return 0;
  }
  return 1;
}

/* One /ws message `text`/`len` (borrowed), which came at t0; the session
 * is open and idle. The common shapes take the scan; the rest is decoded
 * with jansson, after a check that refuses a text that is not JSON
 * without building it (sv_json_load). */
static void ws_message(sv_ws_t *c, const char *text, size_t len,
                       uint64_t t0) {
  json_error_t err;
  json_t *root, *type, *data;
  const char *t;
  sv_wsmsg_t f;
  if (sv_wsmsg_scan(text, len, &f) && ws_message_fast(c, text, t0, &f))
    return;
  root = sv_json_load(c->sv, text, len, &err);
  if (root == NULL &&
      (root = sv_json_limit_error(c->sv, text, len, NULL)) != NULL) {
    sv_ws_error(c, "VALIDATION_ERROR", "Invalid message", /* JSON all the */
                json_pack("{s:[o]}", "errors", root));    /* same */
    return;
  }
  if (root == NULL) {
    char msg[256];
    snprintf(msg, sizeof msg, "Invalid JSON: %s", err.text);
    sv_ws_error(c, "INVALID_JSON", msg, NULL);
    return;
  }
  if (!json_is_object(root)) {
    sv_ws_error(c, "SESSION_ERROR", "Invalid message: a frame must be a "
                "JSON object", NULL);
    ws_refuse(c, 1000, NULL);
    json_decref(root);
    return;
  }
  type = json_object_get(root, "type");
  t = json_is_string(type) ? json_string_value(type) : NULL;
  data = json_object_get(root, "data");
  if (t == NULL) {
    char msg[128], *v = type ? json_dumps(type, JSON_ENCODE_ANY) : NULL;
    snprintf(msg, sizeof msg, "Unknown message type: %.64s", v ? v : "");
    free(v);
    sv_ws_error(c, "UNKNOWN_TYPE", msg, NULL);
  } else if (strcmp(t, "reset") == 0) {
    json_t *errs = NULL;
    if (extra_fields(c, root, "data")) {
    } else if (data && !json_is_null(data) && !json_is_object(data)) {
      invalid_field(c, "dict_type", "data", "Input should be a valid "
                    "dictionary", data);
    } else if (json_is_object(data) &&
               (errs = sv_reset_errors(data, "data")) != NULL) {
      sv_ws_error(c, "VALIDATION_ERROR", "Invalid message",
                  json_pack("{s:o}", "errors", errs));
    } else {
      start_call_value(c, LUDO__CALL_RESET,
                       json_is_object(data) ? data : NULL, t0);
    }
  } else if (strcmp(t, "step") == 0) {
    if (extra_fields(c, root, "data")) {
    } else if (data == NULL) {
      invalid_field(c, "missing", "data", "Field required", root);
    } else if (!json_is_object(data)) {
      invalid_field(c, "dict_type", "data", "Input should be a valid "
                    "dictionary", data);
    } else {
      start_call_value(c, LUDO__CALL_STEP, data, t0);
    }
  } else if (strcmp(t, "state") == 0) {
    if (!extra_fields(c, root, NULL))
      start_call(c, LUDO__CALL_STATE, NULL, 0, t0);
  } else if (strcmp(t, "close") == 0) {
    if (!extra_fields(c, root, NULL)) sv_ws_close(c, 1000, NULL);
  } else if (strcmp(t, "mcp") == 0) {
    if (extra_fields(c, root, "data")) {
    } else if (!json_is_object(data)) {
      invalid_field(c, data ? "dict_type" : "missing", "data",
                    data ? "Input should be a valid dictionary"
                         : "Field required",
                    data);
    } else {
      char *text = json_dumps(data, JSON_COMPACT);
      if (text) sv_mcp_handle(c->sv, c->sess, NULL, c, 2, text, strlen(text));
      free(text);
    }
  } else {
    char msg[128];
    snprintf(msg, sizeof msg, "Unknown message type: %.64s", t);
    sv_ws_error(c, "UNKNOWN_TYPE", msg, NULL);
  }
  json_decref(root);
}

/* 1 when the client's session can take a message now. */
static int ready(const sv_ws_t *c) {
  return !c->closing && !c->sv->draining && c->sess && !c->sess->busy &&
         !c->sess->opening && c->batch == NULL;
}

/* Handles one message (borrowed) now: the client is ready. */
static void handle(sv_ws_t *c, const char *data, size_t len, uint64_t t0) {
  if (c->mcp)
    sv_mcp_handle(c->sv, c->sess, NULL, c, 1, data, len);
  else
    ws_message(c, data, len, t0);
}

/* What a client gets for the message that ended its input, by c->ending:
 * the SESSION_ERROR's message, the close code and reason. */
static const struct refusal_s {
  const char *message;
  int code;
  const char *reason;
} refusals[] = {
    [SV_END_COUNT] = {"Too many messages waiting for their replies: wait "
                      "for a reply before sending more",
                      1008, "too many messages in flight"},
    [SV_END_BYTES] = {"Too many bytes waiting for their replies: wait for "
                      "a reply before sending more",
                      1008, "too many bytes in flight"},
    [SV_END_BINARY] = {"Binary frames are not supported: send each message "
                       "as a JSON text frame",
                       1003, "binary frames are not supported"},
};

/* After a refused message (c->ending), once every message queued before
 * it has its reply: the error, then the close (one reply per request, in
 * order, the error last). */
static void refuse_end(sv_ws_t *c) {
  if (!c->ending || c->head != NULL || c->closing || c->batch != NULL ||
      (c->sess != NULL && (c->sess->busy || c->sess->opening)))
    return;
  {
    const struct refusal_s *r = &refusals[c->ending];
    sv_ws_error(c, "SESSION_ERROR", r->message, NULL);
    ws_refuse(c, r->code, r->reason);
  }
}

/* The memory of queued message m. */
static size_t msg_size(const sv_msg_t *m) { return sizeof *m + m->len + 1; }

/* Brings what the client counts against the server's input budget up to
 * date with its queue: the bytes past its first SV_WS_QUEUE_FREE. */
static void queue_charge(sv_ws_t *c) {
  ludo__net_budget_t *b = &c->sv->shared->input;
  size_t want = c->queued_bytes > SV_WS_QUEUE_FREE
                    ? c->queued_bytes - SV_WS_QUEUE_FREE
                    : 0;
  if (want > c->charged) atomic_fetch_add(&b->used, want - c->charged);
  else if (want < c->charged) atomic_fetch_sub(&b->used, c->charged - want);
  c->charged = want;
}

/* 1 when `size` more bytes may wait in the client's queue: a message may
 * be as big as --max-message, so the queue of one client holds two of
 * them at most, and all clients' queues, of every worker, past their
 * first SV_WS_QUEUE_FREE, --max-output: the WebSocket layer goes on
 * reading during a long call, and only this bounds what piles up. */
static int queue_fits(const sv_ws_t *c, size_t size) {
  ludo__net_budget_t *b = &c->sv->shared->input;
  size_t after = c->queued_bytes + size, want, others, max;
  if (after > 2 * c->sv->wso.max_message) return 0;
  want = after > SV_WS_QUEUE_FREE ? after - SV_WS_QUEUE_FREE : 0;
  others = atomic_load(&b->used) - c->charged;
  max = atomic_load(&b->max);
  return others <= max && want <= max - others;
}

/* Takes the first queued message off the queue (the caller frees it). */
static sv_msg_t *unqueue(sv_ws_t *c) {
  sv_msg_t *m = c->head;
  c->head = m->next;
  if (c->head == NULL) c->tail = NULL;
  c->queued--;
  c->queued_bytes -= msg_size(m);
  queue_charge(c);
  return m;
}

void sv_ws_pump(sv_ws_t *c) {
  if (c->remote_from) {
    sv_remote_pump(c);
    return;
  }
  while (c->head && ready(c)) {
    sv_msg_t *m = unqueue(c);
    handle(c, m->data, m->len, m->t0_us);
    ludo__free(&c->sv->core->heap, m, msg_size(m));
  }
  refuse_end(c);
}

static void free_queue(sv_ws_t *c) {
  while (c->head) {
    sv_msg_t *m = unqueue(c);
    ludo__free(&c->sv->core->heap, m, msg_size(m));
  }
}

/* Queues a copy of message data/len to wait for the session; 0, or -1
 * when out of memory. */
static int enqueue(sv_ws_t *c, const char *data, size_t len) {
  sv_msg_t *m = ludo__malloc(&c->sv->core->heap, sizeof *m + len + 1);
  if (m == NULL) return -1;
  m->next = NULL;
  m->t0_us = sv_now_us();
  m->len = len;
  memcpy(m->data, data, len);
  m->data[len] = '\0';
  if (c->tail) c->tail->next = m;
  else c->head = m;
  c->tail = m;
  c->queued++;
  c->queued_bytes += msg_size(m);
  queue_charge(c);
  return 0;
}

/* ---- the WebSocket's callbacks ---------------------------------------- */

static void on_message(void *ud, ludo__ws_t *ws, int binary,
                       const char *data, size_t len) {
  sv_ws_t *c = ud;
  (void)ws;
  atomic_fetch_add(&c->sv->shared->metrics.ws_messages, 1);
  atomic_fetch_add(&c->sv->shared->metrics.bytes_in, len);
  if (c->closing || c->ending) return; /* after a refusal: dropped */
  if (binary) { /* refused in its turn, after the replies owed before */
    c->ending = SV_END_BINARY;
  } else if (c->head == NULL && ready(c)) { /* nothing waits: no copy */
    handle(c, data, len, sv_now_us());
    return;
  } else if (c->queued >= SV_WS_QUEUE_MAX) {
    c->ending = SV_END_COUNT;
  } else if (!queue_fits(c, sizeof(sv_msg_t) + len + 1)) {
    c->ending = SV_END_BYTES;
  } else if (enqueue(c, data, len) != 0) {
    ws_refuse(c, 1011, "out of memory");
    return;
  }
  sv_ws_pump(c);
}

static void on_close(void *ud, ludo__ws_t *ws, int code, const char *reason,
                     size_t len) {
  sv_ws_t *c = ud;
  ludo__serve_t *sv = c->sv;
  (void)ws;
  (void)code;
  (void)reason;
  (void)len;
  c->ws = NULL;
  c->closing = 1;
  if (c->sess) {
    sv_sess_t *x = c->sess;
    c->sess = NULL;
    if (attached(x)) { /* the session outlives the socket */
      sv_sess_detach(x);
    } else {
      sv_sess_close(x);
    }
  }
  free_queue(c);
  sv_mcp_batch_free(c->batch);
  if (c->prev) c->prev->next = c->next;
  else sv->clients = c->next;
  if (c->next) c->next->prev = c->prev;
  ludo__free(&sv->core->heap, c, sizeof *c);
  if (sv->closing) sv_maybe_finish(sv);
}

/* ---- accepting -------------------------------------------------------- */

static void ws_opened(sv_sess_t *x, int status, const char *data,
                      size_t len) {
  sv_ws_t *c = x->ws;
  (void)data;
  (void)len;
  if (c == NULL) return;
  if (status != 0) {
    char msg[256];
    const char *name = json_string_value(json_object_get(c->sv->info,
                                                         "name"));
    snprintf(msg, sizeof msg, "Environment factory '%s' failed to create "
             "instance.", name ? name : "?");
    c->sess = NULL;
    if (c->mcp) {
      sv_rpc_error(c->sv, NULL, c, 1, NULL, -32000, msg,
                   json_pack("{s:s}", "factory_name", name ? name : "?"));
    } else {
      sv_ws_error(c, "FACTORY_ERROR", msg,
                  json_pack("{s:s}", "factory_name", name ? name : "?"));
    }
    sv_ws_close(c, 1011, "the session could not open");
    return;
  }
  sv_ws_pump(c);
}

/* Attaches c to the session named by ?session_id=; 0, or -1 after
 * refusing (the connection closes). */
static int attach(sv_ws_t *c, const char *id) {
  sv_sess_t *x;
  char msg[160];
  if (sv_fwd_attach(c, id)) return 0; /* another worker's session */
  if (sv_check_attach(c->sv, id, &x, msg, sizeof msg) == 0) {
    x->ws = c;
    c->sess = x;
    return 0;
  }
  sv_ws_error(c, "SESSION_ERROR", msg, NULL);
  sv_ws_close(c, 1000, NULL);
  return -1;
}

void sv_ws_accept(ludo__serve_t *sv, ludo__http_req_t *req, int mcp) {
  ludo__ws_callbacks_t cb = {on_message, on_close, NULL};
  sv_ws_t *c = ludo__calloc(&sv->core->heap, sizeof *c);
  sv_sess_t *x;
  char idbuf[64];
  const char *id;
  int why, rc;
  if (c == NULL) {
    sv_respond_detail(sv, req, 500, "out of memory");
    return;
  }
  c->sv = sv;
  c->mcp = mcp;
  c->serial = ++sv->next_seq;
  id = mcp ? NULL : sv_query_value(ludo__http_req_query(req),
                                   "session_id", idbuf, sizeof idbuf);
  {
    ludo__ws_options_t o = sv->wso; /* MCP's clients ask for "mcp" */
    if (mcp) o.subprotocol = "mcp";
    rc = ludo__ws_accept(req, &o, &cb, c, &c->ws);
  }
  if (rc != 0) {
    if (rc == LUDO_ENOMEM) sv_respond_detail(sv, req, 500, "out of memory");
    ludo__free(&sv->core->heap, c, sizeof *c);
    return;
  }
  c->next = sv->clients;
  if (sv->clients) sv->clients->prev = c;
  sv->clients = c;
  if (id != NULL) {
    attach(c, id);
    return;
  }
  x = sv_sess_open(sv, mcp ? SV_SESS_MCP_WS : SV_SESS_WS, ws_opened, &why);
  if (x == NULL) {
    char msg[200];
    sv_capacity_text(sv, msg, sizeof msg);
    if (why != LUDO_EBUSY) {
      sv_ws_error(c, "SESSION_ERROR", "the server cannot open a session "
                  "now", NULL);
    } else if (mcp) {
      sv_rpc_error(sv, NULL, c, 1, NULL, -32000, msg,
                   json_pack("{s:I,s:I}", "active_sessions",
                             (json_int_t)sv_active_sessions(sv),
                             "max_sessions", (json_int_t)sv->o.max_sessions));
    } else {
      sv_ws_error(c, "CAPACITY_REACHED", msg,
                  json_pack("{s:I,s:I}", "active_sessions",
                            (json_int_t)sv_active_sessions(sv),
                            "max_sessions", (json_int_t)sv->o.max_sessions));
    }
    sv_ws_close(c, 1000, NULL);
    return;
  }
  x->ws = c;
  c->sess = x;
}
