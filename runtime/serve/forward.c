/* forward.c - named sessions across the workers of a group: the checks a
 * call on a named session passes on the worker that owns it, and the
 * messages that carry such a call from the worker a request reached to
 * that owner, and its answer back (DESIGN.md "Execution model":
 * cross-worker requests are messages, never shared Lua state). So a client
 * may send each request on a new connection, whichever worker the kernel
 * gives it (docs/serve-workers.md).
 *
 * The asking side keeps a proxy for what it passed on: an sv_sess_t with
 * `owner` set and a number (`seq`), in the server's proxy table, not in
 * its sessions. A request's proxy (X-Session-Id, tools/call, session/close)
 * holds the request's context, and when the answer comes it runs the
 * continuation the caller gave, as a session of ours would have; it is
 * freed then. An attached WebSocket's proxy lives as long as the
 * attachment: it is the client's session record, so /ws frames and MCP
 * calls reach it through sv_sess_call like any session's.
 *
 * The owning side runs the call on its record as for a request of its
 * own (same checks, same idle clock) with a continuation that answers;
 * a WebSocket of another worker attached to one of its sessions is a remote
 * client (sv_ws_t with `remote_from`), so every check that asks "is it
 * attached?" sees it, and closing the remote closes the WebSocket there.
 *
 * Messages from one worker to another arrive in the order sent. A worker
 * that stops answers what is queued for it with refusals, and answers for
 * proxies it dropped are ignored (their number is gone). */
#include "serve/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- ids ---------------------------------------------------------------- */

/* The worker owning session `id` when it is another worker of the group
 * ("w<N>-..." with N in range and not ours); -1 otherwise. */
static int owner_of(ludo__serve_t *sv, const char *id) {
  unsigned long k = 0;
  const char *p = id + 1;
  if (sv->group == NULL || sv_group_size(sv->group) < 2 || id[0] != 'w' ||
      *p < '0' || *p > '9')
    return -1;
  for (; *p >= '0' && *p <= '9'; p++) {
    k = k * 10 + (unsigned long)(*p - '0');
    if (k >= LUDO_SERVER_MAX_WORKERS) return -1;
  }
  if (*p != '-' || k >= sv_group_size(sv->group) || k == sv->worker)
    return -1;
  return (int)k;
}

/* ---- the checks of named sessions (both sides) -------------------------- */

/* Takes x, about to be used, off the list of sessions that give way;
 * 0, or -1 when it gave way just now: *out is cleared and msg says so. */
static int take(ludo__serve_t *sv, sv_sess_t *x, sv_sess_t **out,
                char *msg, size_t n) {
  char id[sizeof x->id];
  if (!x->listed) return 0;
  memcpy(id, x->id, sizeof id); /* x may go */
  if (sv_reclaim_take(x) == 0) return 0;
  *out = NULL;
  sv_unknown_text(sv, id, msg, n);
  return -1;
}

int sv_check_http(ludo__serve_t *sv, const char *id, sv_sess_t **out,
                  char *msg, size_t n) {
  sv_sess_t *x = sv_sess_find(sv, id);
  *out = x;
  if (x == NULL || x->opening) {
    sv_unknown_text(sv, id, msg, n);
    return 404;
  }
  if (x->ws != NULL) {
    snprintf(msg, n, "Session %s belongs to a WebSocket; send its calls "
             "there", x->id);
    return 409;
  }
  if (x->busy) {
    snprintf(msg, n, "Session %s is busy with another call", x->id);
    return 409;
  }
  return take(sv, x, out, msg, n) == 0 ? 0 : 404;
}

int sv_check_tool(ludo__serve_t *sv, const char *id, sv_sess_t **out,
                  char *msg, size_t n) {
  sv_sess_t *x = sv_sess_find(sv, id);
  *out = x;
  if (x == NULL || x->opening) {
    sv_unknown_text(sv, id, msg, n);
    return -32602;
  }
  if (x->ws != NULL) { /* its calls come in order on that socket */
    snprintf(msg, n, "Session %s belongs to a WebSocket; send its calls "
             "there", x->id);
    return -32600;
  }
  if (x->busy) {
    snprintf(msg, n, "Session %s is busy with another call", x->id);
    return -32600;
  }
  return take(sv, x, out, msg, n) == 0 ? 0 : -32602;
}

int sv_check_attach(ludo__serve_t *sv, const char *id, sv_sess_t **out,
                    char *msg, size_t n) {
  sv_sess_t *x = sv_sess_find(sv, id);
  *out = x;
  if (x == NULL || (x->kind != SV_SESS_MCP && x->kind != SV_SESS_HTTP))
    sv_unknown_text(sv, id, msg, n);
  else if (x->opening)
    snprintf(msg, n, "Session %s is still initializing", x->id);
  else if (x->ws != NULL)
    snprintf(msg, n, "Session %s already has an attached WebSocket",
             x->id);
  else
    return take(sv, x, out, msg, n);
  return -1;
}

int sv_close_named(ludo__serve_t *sv, const char *id, char **result,
                   char *msg, size_t n) {
  sv_sess_t *x = sv_sess_find(sv, id);
  json_t *v;
  *result = NULL;
  if (x == NULL) {
    sv_unknown_text(sv, id, msg, n);
    return -32602;
  }
  if (x->kind == SV_SESS_WS || x->kind == SV_SESS_MCP_WS) {
    snprintf(msg, n, "Cannot close active WebSocket-managed session via "
             "MCP method");
    return -32600;
  }
  if (x->opening) {
    snprintf(msg, n, "Session %s is still initializing; retry shortly",
             x->id);
    return -32600;
  }
  if (x->ws != NULL) /* attached: closes with its WebSocket */
    v = json_pack("{s:s,s:b,s:b}", "session_id", x->id, "closed", 0,
                  "closing", 1);
  else
    v = json_pack("{s:s,s:b}", "session_id", x->id, "closed", 1);
  *result = v ? json_dumps(v, JSON_COMPACT) : NULL;
  json_decref(v);
  if (*result == NULL) {
    snprintf(msg, n, "out of memory");
    return -32603;
  }
  if (x->ws != NULL)
    sv_ws_close(x->ws, 1000, "session closed");
  else
    sv_sess_close(x);
  return 0;
}

/* ---- messages ------------------------------------------------------------ */

/* Sends a message to worker `to`. Returns 0, LUDO_ENOMEM, or LUDO_ECLOSED
 * (that worker takes no messages: it is stopping, or gone). */
static int post_wall(ludo__serve_t *sv, unsigned to, int op, uint64_t seq,
                     const char *id, int kind, int status, const char *data,
                     size_t len, uint32_t wall_ms) {
  sv_fwd_t *m = sv_fwd_new(data, len);
  int rc;
  if (m == NULL) return LUDO_ENOMEM;
  m->wall_ms = wall_ms;
  m->op = op;
  m->from = sv->worker;
  m->seq = seq;
  m->kind = kind;
  m->status = status;
  snprintf(m->id, sizeof m->id, "%s", id ? id : "");
  rc = sv_group_post(sv->group, to, m);
  if (rc != 0) sv_fwd_free(m);
  return rc;
}

static int post(ludo__serve_t *sv, unsigned to, int op, uint64_t seq,
                const char *id, int kind, int status, const char *data,
                size_t len) {
  return post_wall(sv, to, op, seq, id, kind, status, data, len, 0);
}

/* Answers proxy `seq` of worker `to`. An asker that is gone, or out of
 * memory here, leaves its proxy to its own close. */
static void answer(ludo__serve_t *sv, unsigned to, uint64_t seq, int status,
                   int refusal, int sess_kind, const char *data,
                   size_t len) {
  sv_fwd_t *m = sv_fwd_new(data, len);
  if (m == NULL) return;
  m->op = SV_FWD_ANSWER;
  m->from = sv->worker;
  m->seq = seq;
  m->status = status;
  m->refusal = refusal;
  m->sess_kind = sess_kind;
  if (sv_group_post(sv->group, to, m) != 0) sv_fwd_free(m);
}

static void answer_text(ludo__serve_t *sv, const sv_fwd_t *q, int status,
                        int refusal, const char *text) {
  answer(sv, q->from, q->seq, status, refusal, 0, text, strlen(text));
}

/* ---- proxies (the asking side) ----------------------------------------- */

static sv_sess_t *proxy_new(ludo__serve_t *sv, int owner, const char *id,
                            int op) {
  sv_sess_t *x = ludo__calloc(&sv->core->heap, sizeof *x);
  unsigned b;
  if (x == NULL) return NULL;
  x->sv = sv;
  x->owner = (unsigned)owner + 1;
  x->fwd_op = op;
  x->seq = ++sv->next_seq;
  x->kind = SV_SESS_MCP;
  snprintf(x->id, sizeof x->id, "%s", id);
  b = (unsigned)(x->seq % SV_PROXY_BUCKETS);
  x->hnext = sv->proxies[b];
  sv->proxies[b] = x;
  sv->nproxies++;
  return x;
}

static sv_sess_t *proxy_find(ludo__serve_t *sv, uint64_t seq) {
  sv_sess_t *x = sv->proxies[seq % SV_PROXY_BUCKETS];
  while (x && x->seq != seq) x = x->hnext;
  return x;
}

/* Frees the proxy (last: the server may go with it when closing). */
static void proxy_free(sv_sess_t *x) {
  ludo__serve_t *sv = x->sv;
  sv_sess_t **pp = &sv->proxies[x->seq % SV_PROXY_BUCKETS];
  while (*pp && *pp != x) pp = &(*pp)->hnext;
  if (*pp) *pp = x->hnext;
  sv->nproxies--;
  if (x->req) ludo__http_req_set_data(x->req, NULL);
  if (x->rpc_id) json_decref(x->rpc_id);
  ludo__free(&sv->core->heap, x, sizeof *x);
  if (sv->closing) sv_maybe_finish(sv);
}

/* Whether the WebSocket request proxy x came on is still one of the
 * server's clients: it may have gone since, and another be allocated at
 * its address (its serial then differs). */
static int client_alive(ludo__serve_t *sv, const sv_sess_t *x) {
  sv_ws_t *k;
  for (k = sv->clients; k; k = k->next)
    if (k == x->ws) return k->serial == x->ws_serial;
  return 0;
}

/* The text of a request whose owner takes no messages. */
static void gone_text(sv_sess_t *x, char *buf, size_t n) {
  snprintf(buf, n, "Session %s lives on worker %u, which is not running "
           "(the server is shutting down)", x->id, x->owner - 1);
}

/* Answers a request's proxy x with refusal `code` and `text`: {"detail"}
 * with that status, or a JSON-RPC error with that code. */
static void proxy_refuse(sv_sess_t *x, int code, const char *text) {
  ludo__serve_t *sv = x->sv;
  ludo__http_req_t *req = x->req;
  sv_ws_t *ws = x->rpc_ws ? x->ws : NULL;
  x->req = NULL;
  if (req) ludo__http_req_set_data(req, NULL);
  if (ws && !client_alive(sv, x)) ws = NULL;
  if (x->fwd_op == SV_FWD_HTTP) {
    if (req) sv_respond_detail(sv, req, code, text);
  } else if (req || ws) {
    sv_rpc_error(sv, req, ws, x->rpc_ws, x->rpc_id, code, text, NULL);
  }
}

/* Passes proxy x's request on; a worker that takes no messages gets the
 * request refused at once. */
static void proxy_send(sv_sess_t *x, int kind, const char *data,
                       size_t len) {
  ludo__serve_t *sv = x->sv;
  char msg[200];
  int rc = post_wall(sv, x->owner - 1, x->fwd_op, x->seq, x->id, kind, 0,
                     data, len, x->wall_ms);
  if (rc == 0) {
    atomic_fetch_add(&sv->wm->forwarded, 1);
    return;
  }
  if (rc == LUDO_ENOMEM)
    snprintf(msg, sizeof msg, "out of memory");
  else
    gone_text(x, msg, sizeof msg);
  proxy_refuse(x, x->fwd_op == SV_FWD_HTTP ? (rc == LUDO_ENOMEM ? 500 : 503)
                                           : -32000, msg);
  proxy_free(x);
}

int sv_fwd_http(ludo__serve_t *sv, ludo__http_req_t *req, const char *id,
                int kind, const char *json, size_t len, uint32_t wall_ms,
                sv_done_fn done) {
  int owner = owner_of(sv, id);
  sv_sess_t *x;
  if (owner < 0) return 0;
  x = proxy_new(sv, owner, id, SV_FWD_HTTP);
  if (x == NULL) {
    sv_respond_detail(sv, req, 500, "out of memory");
    return 1;
  }
  x->req = req;
  x->call = kind;
  x->done = done;
  x->busy = 1;
  x->t0_us = sv_now_us();
  x->wall_ms = wall_ms;
  ludo__http_req_set_data(req, x);
  proxy_send(x, kind, json, len);
  return 1;
}

/* Keeps a JSON-RPC request's context on its proxy. */
static void keep_rpc(sv_sess_t *x, ludo__http_req_t *req, sv_ws_t *ws,
                     int rpc_ws, json_t *rpc_id) {
  x->req = req;
  x->ws = ws;
  x->ws_serial = ws ? ws->serial : 0;
  x->caller = ws;
  x->rpc_ws = ws ? rpc_ws : 0;
  x->rpc_id = rpc_id ? json_incref(rpc_id) : NULL;
  if (req) ludo__http_req_set_data(req, x);
}

int sv_fwd_tool(ludo__serve_t *sv, ludo__http_req_t *req, sv_ws_t *ws,
                int rpc_ws, json_t *rpc_id, const char *id,
                const char *json, size_t len, sv_done_fn done) {
  int owner = owner_of(sv, id);
  sv_sess_t *x;
  if (owner < 0) return 0;
  x = proxy_new(sv, owner, id, SV_FWD_TOOL);
  if (x == NULL) {
    sv_rpc_error(sv, req, ws, rpc_ws, rpc_id, -32603, "out of memory",
                 NULL);
    return 1;
  }
  keep_rpc(x, req, ws, rpc_ws, rpc_id);
  x->call = LUDO__CALL_TOOL;
  x->done = done;
  x->busy = 1;
  x->t0_us = sv_now_us();
  proxy_send(x, LUDO__CALL_TOOL, json, len);
  return 1;
}

int sv_fwd_close(ludo__serve_t *sv, sv_sess_t *bound, ludo__http_req_t *req,
                 sv_ws_t *ws, int rpc_ws, json_t *rpc_id, const char *id) {
  int owner = owner_of(sv, id);
  sv_sess_t *x;
  (void)bound; /* the caller refused the requester's own session */
  if (owner < 0) return 0;
  x = proxy_new(sv, owner, id, SV_FWD_CLOSE);
  if (x == NULL) {
    sv_rpc_error(sv, req, ws, rpc_ws, rpc_id, -32603, "out of memory",
                 NULL);
    return 1;
  }
  keep_rpc(x, req, ws, rpc_ws, rpc_id);
  x->busy = 1;
  proxy_send(x, 0, NULL, 0);
  return 1;
}

int sv_fwd_attach(sv_ws_t *c, const char *id) {
  ludo__serve_t *sv = c->sv;
  int owner = owner_of(sv, id), rc;
  char msg[200];
  sv_sess_t *x;
  if (owner < 0) return 0;
  x = proxy_new(sv, owner, id, SV_FWD_ATTACH);
  if (x == NULL) {
    sv_ws_error(c, "SESSION_ERROR", "out of memory", NULL);
    sv_ws_close(c, 1011, "out of memory");
    return 1;
  }
  x->opening = 1; /* the client's messages wait for the answer */
  x->ws = c;
  c->sess = x;
  rc = post(sv, owner, SV_FWD_ATTACH, x->seq, id, 0, 0, NULL, 0);
  if (rc == 0) {
    atomic_fetch_add(&sv->wm->forwarded, 1);
    return 1;
  }
  if (rc == LUDO_ENOMEM)
    snprintf(msg, sizeof msg, "out of memory");
  else
    gone_text(x, msg, sizeof msg);
  c->sess = NULL;
  x->ws = NULL;
  proxy_free(x);
  sv_ws_error(c, "SESSION_ERROR", msg, NULL);
  sv_ws_close(c, 1000, NULL);
  return 1;
}

int sv_proxy_call(sv_sess_t *x, int kind, const char *json, size_t len,
                  sv_done_fn done) {
  ludo__serve_t *sv = x->sv;
  if (x->dead || x->gone || x->fwd_op != SV_FWD_ATTACH) return LUDO_ECLOSED;
  if (x->busy || x->opening) return LUDO_EBUSY;
  if (post(sv, x->owner - 1, SV_FWD_CALL, x->seq, x->id, kind, 0, json,
           len) != 0)
    return LUDO_ECLOSED;
  atomic_fetch_add(&sv->wm->forwarded, 1);
  x->busy = 1;
  x->call = kind;
  x->done = done;
  return 0;
}

/* Ends an attached WebSocket's proxy: tells the owner (`op`: END or
 * DETACH) unless it dropped the attachment itself; a call in flight ends
 * with ECANCELED, its continuation seeing no WebSocket, as a session's
 * call does when it closes. */
static void proxy_end(sv_sess_t *x, int op) {
  ludo__serve_t *sv = x->sv;
  int draining = sv->draining; /* read first: see on_answer */
  if (x->dead) return;
  x->dead = 1;
  if (x->ws && x->ws->sess == x) x->ws->sess = NULL;
  x->ws = NULL;
  x->caller = NULL;
  if (!x->gone)
    post(sv, x->owner - 1, op, x->seq, x->id, 0, 0, NULL, 0);
  if (x->busy) {
    sv_done_fn done = x->done;
    x->busy = 0;
    x->done = NULL;
    x->in_cb++;
    if (done) done(x, LUDO_ECANCELED, "the session was closed", 22);
    x->in_cb--;
  }
  if (x->in_cb == 0) proxy_free(x);
  if (draining) sv_drain_check(sv); /* it waited for no more answers */
}

void sv_proxy_close(sv_sess_t *x) {
  if (x->fwd_op == SV_FWD_ATTACH)
    proxy_end(x, SV_FWD_END);
  else
    x->dead = 1; /* a request's proxy: freed once its answer is given */
}

void sv_proxy_detach(sv_sess_t *x) {
  if (x->fwd_op == SV_FWD_ATTACH) proxy_end(x, SV_FWD_DETACH);
}

/* An answer for proxy m->seq. */
static void answer_proxy(ludo__serve_t *sv, const sv_fwd_t *m) {
  sv_sess_t *x = proxy_find(sv, m->seq);
  sv_done_fn done;
  if (x == NULL || x->dead) return; /* dropped meanwhile */
  if (x->fwd_op == SV_FWD_ATTACH && x->opening) {
    sv_ws_t *c = x->ws;
    if (m->refusal) {
      c->sess = NULL;
      x->ws = NULL;
      x->gone = 1;
      proxy_free(x);
      sv_ws_error(c, "SESSION_ERROR", m->data, NULL);
      sv_ws_close(c, 1000, NULL);
      return;
    }
    x->opening = 0;
    x->kind = m->sess_kind;
    sv_ws_pump(c);
    return;
  }
  if (x->fwd_op == SV_FWD_CLOSE) {
    if (m->refusal) {
      proxy_refuse(x, m->refusal, m->data);
    } else {
      ludo__http_req_t *req = x->req;
      sv_ws_t *ws = x->rpc_ws ? x->ws : NULL;
      if (ws && !client_alive(sv, x)) ws = NULL;
      x->req = NULL;
      if (req) ludo__http_req_set_data(req, NULL);
      if (req || ws)
        sv_rpc_reply(sv, req, ws, x->rpc_ws, x->rpc_id, m->data, m->len);
    }
    proxy_free(x);
    return;
  }
  x->busy = 0;
  if (m->refusal == SV_FWD_DROPPED) { /* no reply: the drain's 1001 comes */
    x->done = NULL;
    x->caller = NULL;
    return;
  }
  if (m->refusal) { /* a request's proxy (HTTP, tools/call) */
    proxy_refuse(x, m->refusal, m->data);
    proxy_free(x);
    return;
  }
  if (x->fwd_op != SV_FWD_ATTACH) x->kind = m->sess_kind;
  if (x->fwd_op == SV_FWD_TOOL && x->rpc_ws && !client_alive(sv, x))
    x->ws = NULL, x->caller = NULL, x->rpc_ws = 0;
  done = x->done;
  x->done = NULL;
  x->in_cb++;
  if (done) done(x, m->status, m->data, m->len);
  x->in_cb--;
  if (x->fwd_op != SV_FWD_ATTACH || (x->dead && x->in_cb == 0))
    proxy_free(x);
}

static void on_answer(ludo__serve_t *sv, const sv_fwd_t *m) {
  /* Read first: once closed, the server may go with the proxy. While it
   * drains it stays (its HTTP server is open; the drain ends from the
   * loop). */
  int draining = sv->draining;
  answer_proxy(sv, m);
  if (draining) sv_drain_check(sv); /* that call was one it waited for */
}

/* The owner ended the attachment of proxy m->seq's WebSocket. */
static void on_ws_close(ludo__serve_t *sv, const sv_fwd_t *m) {
  sv_sess_t *x = proxy_find(sv, m->seq);
  sv_ws_t *c;
  if (x == NULL || x->dead || x->fwd_op != SV_FWD_ATTACH) return;
  x->gone = 1; /* nothing to tell the owner on the way out */
  c = x->ws;
  if (c == NULL) return;
  sv_ws_close(c, m->status, m->data); /* closes x too */
}

/* ---- remote records and forwarded calls (the owning side) ----------------------- */

/* The continuation of a forwarded call: answers the asker. */
static void fwd_done(sv_sess_t *x, int status, const char *data,
                     size_t len) {
  unsigned to = x->fwd_from - 1;
  x->fwd_from = 0;
  answer(x->sv, to, x->fwd_seq, status, 0, x->kind, data, len);
}

/* Runs call `kind` with the message's input on x for its asker. */
static void run_call(ludo__serve_t *sv, sv_sess_t *x, const sv_fwd_t *q,
                     int kind) {
  int rc;
  x->fwd_from = q->from + 1;
  x->fwd_seq = q->seq;
  x->wall_ms = q->wall_ms;
  rc = sv_sess_call(x, kind, q->data, q->len, fwd_done);
  if (rc != 0) {
    x->fwd_from = 0;
    answer_text(sv, q, rc, 0, "the call could not start");
  }
}

/* The remote record of the attachment a message names, or NULL. */
static sv_ws_t *remote_of(ludo__serve_t *sv, const sv_fwd_t *q,
                        sv_sess_t **out) {
  sv_sess_t *x = sv_sess_find(sv, q->id);
  *out = x;
  if (x == NULL || x->ws == NULL || x->ws->remote_from != q->from + 1 ||
      x->ws->remote_seq != q->seq)
    return NULL;
  return x->ws;
}

/* A call of remote record c that came while its session was busy with
 * an earlier client's call (a WebSocket that left, an HTTP request): it
 * waits, as a local client's message does, and runs when that call ends
 * (sv_remote_pump). Its asker has one call in flight at a time. */
static void wait_call(ludo__serve_t *sv, sv_ws_t *c, const sv_fwd_t *q) {
  sv_fwd_t *m = c->waiting ? NULL : sv_fwd_new(q->data, q->len);
  if (m == NULL) {
    answer_text(sv, q, LUDO_EBUSY, 0, c->waiting ? "the session is busy"
                                                 : "out of memory");
    return;
  }
  m->op = q->op;
  m->from = q->from;
  m->seq = q->seq;
  m->kind = q->kind;
  m->wall_ms = q->wall_ms;
  memcpy(m->id, q->id, sizeof m->id);
  c->waiting = m;
}

void sv_remote_pump(sv_ws_t *c) {
  sv_fwd_t *q = c->waiting;
  if (q == NULL || c->closing || c->sess == NULL || c->sess->busy) return;
  c->waiting = NULL;
  if (c->sv->draining) /* the asker, draining too, waits for an answer */
    answer(c->sv, q->from, q->seq, LUDO_ECANCELED, SV_FWD_DROPPED, 0, "",
           0);
  else
    run_call(c->sv, c->sess, q, q->kind);
  sv_fwd_free(q);
}

/* Unlinks and frees a remote record (last: the server may go with it). */
static void remote_free(ludo__serve_t *sv, sv_ws_t *c) {
  if (c->waiting) sv_fwd_free(c->waiting);
  if (c->prev)
    c->prev->next = c->next;
  else
    sv->clients = c->next;
  if (c->next) c->next->prev = c->prev;
  ludo__free(&sv->core->heap, c, sizeof *c);
  if (sv->closing) sv_maybe_finish(sv);
}

static void on_attach(ludo__serve_t *sv, const sv_fwd_t *q) {
  char msg[200];
  sv_sess_t *x;
  sv_ws_t *c;
  if (sv_check_attach(sv, q->id, &x, msg, sizeof msg) != 0) {
    answer_text(sv, q, 0, 1, msg);
    return;
  }
  c = ludo__calloc(&sv->core->heap, sizeof *c);
  if (c == NULL) {
    answer_text(sv, q, 0, 1, "out of memory");
    return;
  }
  c->sv = sv;
  c->remote_from = q->from + 1;
  c->remote_seq = q->seq;
  c->sess = x;
  x->ws = c;
  c->next = sv->clients;
  if (sv->clients) sv->clients->prev = c;
  sv->clients = c;
  answer(sv, q->from, q->seq, 0, 0, x->kind, "", 0);
}

void sv_remote_close(sv_ws_t *c, int code, const char *reason) {
  ludo__serve_t *sv = c->sv;
  sv_sess_t *x = c->sess;
  const char *r = reason ? reason : "";
  if (c->closing) return;
  c->closing = 1;
  c->sess = NULL;
  /* The close first: the answer of a call the session's close cancels
   * then finds the WebSocket closing (its code stands, 1001 on a
   * shutdown), as a local client's would. */
  post(sv, c->remote_from - 1, SV_FWD_WS_CLOSE, c->remote_seq, NULL, 0,
       code, r, strlen(r));
  if (x) {
    x->ws = NULL;
    sv_sess_close(x);
  }
  remote_free(sv, c);
}

/* A request another worker passed on. */
static void on_request(ludo__serve_t *sv, const sv_fwd_t *q) {
  char msg[200];
  sv_sess_t *x;
  sv_ws_t *c;
  int code;
  switch (q->op) {
    case SV_FWD_HTTP:
      code = sv_check_http(sv, q->id, &x, msg, sizeof msg);
      if (code != 0)
        answer_text(sv, q, 0, code, msg);
      else
        run_call(sv, x, q, q->kind);
      break;
    case SV_FWD_TOOL:
      code = sv_check_tool(sv, q->id, &x, msg, sizeof msg);
      if (code != 0)
        answer_text(sv, q, 0, code, msg);
      else
        run_call(sv, x, q, LUDO__CALL_TOOL);
      break;
    case SV_FWD_CLOSE: {
      char *result;
      code = sv_close_named(sv, q->id, &result, msg, sizeof msg);
      if (code != 0) {
        answer_text(sv, q, 0, code, msg);
      } else {
        answer_text(sv, q, 0, 0, result);
        free(result);
      }
      break;
    }
    case SV_FWD_ATTACH:
      on_attach(sv, q);
      break;
    case SV_FWD_CALL:
      if ((c = remote_of(sv, q, &x)) == NULL)
        answer_text(sv, q, LUDO_ECLOSED, 0, "the session was closed");
      else if (x->busy)
        wait_call(sv, c, q);
      else
        run_call(sv, x, q, q->kind);
      break;
    case SV_FWD_DETACH:
    case SV_FWD_END:
      if ((c = remote_of(sv, q, &x)) == NULL) break;
      x->ws = NULL;
      c->sess = NULL;
      c->closing = 1;
      remote_free(sv, c);
      if (q->op == SV_FWD_END) sv_sess_close(x);
      else sv_reclaim_note(x); /* unattached: it may give way */
      break;
    case SV_FWD_EVICT:
      sv_reclaim_pay(sv);
      break;
    default:
      break;
  }
}

/* A request queued for a worker that stopped: refused as the asker would
 * refuse it had the worker been gone already. */
static void refuse_queued(ludo__serve_t *sv, const sv_fwd_t *q) {
  char msg[200];
  snprintf(msg, sizeof msg, "Session %s lives on worker %u, which is not "
           "running (the server is shutting down)", q->id, sv->worker);
  switch (q->op) {
    case SV_FWD_HTTP: answer_text(sv, q, 0, 503, msg); break;
    case SV_FWD_TOOL:
    case SV_FWD_CLOSE: answer_text(sv, q, 0, -32000, msg); break;
    case SV_FWD_ATTACH: answer_text(sv, q, 0, 1, msg); break;
    case SV_FWD_CALL:
      answer_text(sv, q, LUDO_ECLOSED, 0, "the session was closed");
      break;
    default: break;
  }
}

/* ---- the inbox ---------------------------------------------------------- */

static void dispatch(ludo__serve_t *sv, const sv_fwd_t *m) {
  if (m->op == SV_FWD_ANSWER)
    on_answer(sv, m);
  else if (m->op == SV_FWD_WS_CLOSE)
    on_ws_close(sv, m);
  else
    on_request(sv, m);
}

static void on_inbox(uv_async_t *a) {
  ludo__serve_t *sv = a->data;
  sv_fwd_t *m = sv_group_take(sv->group, sv->worker), *next;
  for (; m; m = next) {
    next = m->next;
    dispatch(sv, m);
    sv_fwd_free(m);
  }
}

static void on_inbox_closed(uv_handle_t *h) {
  ludo__serve_t *sv = h->data;
  ludo__core_t *core = sv->core;
  sv->inbox_closed = 1;
  sv_maybe_finish(sv);            /* may free sv */
  ludo__core_handle_closed(core); /* last: the runtime may go with it */
}

int sv_fwd_start(ludo__serve_t *sv) {
  unsigned n = sv_group_size(sv->group);
  if (uv_async_init(sv->core->loop, &sv->inbox, on_inbox) != 0) {
    snprintf(sv->errmsg, sizeof sv->errmsg, "cannot start worker %u's "
             "inbox", sv->worker);
    return LUDO_EINVAL;
  }
  ludo__core_handle_opened(sv->core);
  sv->inbox.data = sv;
  sv->inbox_on = 1;
  /* The listener keeps the loop running while the server serves. */
  uv_unref((uv_handle_t *)&sv->inbox);
  if (sv_group_join(sv->group, sv->worker, &sv->inbox) != 0) {
    snprintf(sv->errmsg, sizeof sv->errmsg, "worker %u: %s", sv->worker,
             sv->worker >= n ? "out of the group's range" : "taken by "
             "another server of the group");
    uv_close((uv_handle_t *)&sv->inbox, on_inbox_closed);
    return LUDO_EINVAL;
  }
  sv->joined = 1;
  sv->wm = &sv->shared->metrics.workers[sv->worker];
  return 0;
}

void sv_fwd_stop(ludo__serve_t *sv) {
  unsigned b;
  if (sv->joined) {
    sv_fwd_t *m = sv_group_leave(sv->group, sv->worker), *next;
    sv->joined = 0;
    for (; m; m = next) {
      next = m->next;
      if (m->op != SV_FWD_ANSWER && m->op != SV_FWD_WS_CLOSE)
        refuse_queued(sv, m);
      sv_fwd_free(m);
    }
  }
  /* The attached WebSockets' proxies went with their clients; requests
   * still waiting are refused now (their connections close next). */
  for (b = 0; b < SV_PROXY_BUCKETS; b++) {
    while (sv->proxies[b] != NULL) {
      sv_sess_t *x = sv->proxies[b];
      if (x->fwd_op == SV_FWD_ATTACH) {
        x->gone = 1;
        if (x->ws && x->ws->sess == x) x->ws->sess = NULL;
        x->ws = NULL;
      } else if (!x->dead) {
        proxy_refuse(x, x->fwd_op == SV_FWD_HTTP ? 503 : -32000,
                     "the server is shutting down");
      }
      proxy_free(x);
    }
  }
  if (sv->inbox_on && !uv_is_closing((uv_handle_t *)&sv->inbox))
    uv_close((uv_handle_t *)&sv->inbox, on_inbox_closed);
}
