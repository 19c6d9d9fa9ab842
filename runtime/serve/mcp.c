/* mcp.c - JSON-RPC 2.0 for POST /mcp, WS /mcp and /ws {"type":"mcp"}
 * frames: OpenEnv's methods (tools/list, tools/call,
 * openenv/session/create, openenv/session/close) with its error codes,
 * and MCP's own handshake (initialize with version negotiation,
 * notifications, ping) so MCP clients connect too, and JSON-RPC batches
 * on POST /mcp and WS /mcp (docs/protocol.md). */
#include "serve/internal.h"

#include "base/errors.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* MCP protocol versions this server speaks, newest first. */
static const char *const versions[] = {"2025-06-18", "2025-03-26",
                                       "2024-11-05"};

int sv_mcp_version_known(const char *v) {
  size_t i;
  for (i = 0; i < sizeof versions / sizeof *versions; i++)
    if (strcmp(v, versions[i]) == 0) return 1;
  return 0;
}

/* ---- replies ---------------------------------------------------------- */

/* ---- batches ----------------------------------------------------------- */

/* A JSON-RPC batch being answered: its members run one at a time, in
 * order, each reply added to `out`; the array goes once the last member
 * has its reply. One member at a time keeps a batch to what one request
 * may do: a call of a session in flight at most, as for a request alone. */
struct sv_batch_s {
  ludo__serve_t *sv;
  json_t *members;          /* the batch (a reference) */
  size_t next;              /* the member to run next */
  int running;              /* inside batch_run */
  int waiting;              /* the member that ran last owes its reply */
  int oom;                  /* a reply could not be added */
  size_t replies;
  ludo__buf_t out;          /* "[" and the replies so far */
  ludo__http_req_t *req;    /* POST /mcp, or NULL */
  sv_ws_t *ws;              /* WS /mcp (its `batch` is this), or NULL */
  sv_batch_t *next_b, *prev_b; /* the server's POST /mcp batches */
  ludo__task_t go_on;       /* runs the next members from the loop */
};

/* The batch whose member a reply for req / ws answers, or NULL. */
static sv_batch_t *batch_of(ludo__serve_t *sv, ludo__http_req_t *req,
                            sv_ws_t *ws, int rpc_ws) {
  sv_batch_t *b;
  if (ws != NULL) return rpc_ws == 1 ? ws->batch : NULL;
  for (b = sv->batches; b && req; b = b->next_b)
    if (b->req == req) return b;
  return NULL;
}

static void batch_add(sv_batch_t *b, const char *body, size_t len);

/* Sends a JSON-RPC reply (body NULL: it could not be made, out of
 * memory), or adds it to the batch it belongs to. */
static void send_rpc(ludo__serve_t *sv, ludo__http_req_t *req, sv_ws_t *ws,
                     int rpc_ws, const char *body, size_t len) {
  sv_batch_t *b = batch_of(sv, req, ws, rpc_ws);
  if (b != NULL) {
    batch_add(b, body, len);
  } else if (body == NULL) {
    if (req) sv_respond_detail(sv, req, 500, "out of memory");
  } else if (req != NULL) {
    sv_respond_json(sv, req, 200, body, len, NULL, 0);
  } else if (ws != NULL) {
    if (rpc_ws == 2) {
      ludo__buf_t b;
      ludo__buf_init(&b, ludo__alloc_fn, &sv->core->heap);
      if (ludo__buf_adds(&b, "{\"type\":\"mcp\",\"data\":") == 0 &&
          ludo__buf_add(&b, body, len) == 0 && ludo__buf_addc(&b, '}') == 0)
        sv_ws_send(ws, b.p, b.len);
      ludo__buf_free(&b);
    } else {
      sv_ws_send(ws, body, len);
    }
  }
}

void sv_rpc_reply(ludo__serve_t *sv, ludo__http_req_t *req, sv_ws_t *ws,
                  int rpc_ws, json_t *id, const char *result, size_t len) {
  char *idtext = json_dumps(id ? id : json_null(), JSON_ENCODE_ANY);
  ludo__buf_t b;
  ludo__buf_init(&b, ludo__alloc_fn, &sv->core->heap);
  if (idtext &&
      ludo__buf_printf(&b, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":",
                       idtext) == 0 &&
      ludo__buf_add(&b, result, len) == 0 && ludo__buf_addc(&b, '}') == 0)
    send_rpc(sv, req, ws, rpc_ws, b.p, b.len);
  else
    send_rpc(sv, req, ws, rpc_ws, NULL, 0);
  ludo__buf_free(&b);
  free(idtext);
}

void sv_rpc_error(ludo__serve_t *sv, ludo__http_req_t *req, sv_ws_t *ws,
                  int rpc_ws, json_t *id, int code, const char *message,
                  json_t *data) {
  json_t *v = json_pack("{s:s,s:O,s:{s:i,s:o,s:o}}", "jsonrpc", "2.0", "id",
                        id ? id : json_null(), "error", "code", code,
                        "message", sv_jstr(message, (size_t)-1), "data",
                        data ? data : json_null());
  char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
  ludo__metrics_proto(&sv->shared->metrics, LUDO__MERR_RPC);
  send_rpc(sv, req, ws, rpc_ws, text, text ? strlen(text) : 0);
  free(text);
  json_decref(v);
}

/* Replies with the JSON of `v` (taken). */
static void reply_value(ludo__serve_t *sv, ludo__http_req_t *req,
                        sv_ws_t *ws, int rpc_ws, json_t *id, json_t *v) {
  char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
  if (text) sv_rpc_reply(sv, req, ws, rpc_ws, id, text, strlen(text));
  else send_rpc(sv, req, ws, rpc_ws, NULL, 0);
  free(text);
  json_decref(v);
}

/* A request's context, kept on its session record while a call runs. */
static void keep(sv_sess_t *x, ludo__http_req_t *req, sv_ws_t *ws,
                 int rpc_ws, json_t *id) {
  x->req = req;
  x->rpc_ws = ws ? rpc_ws : 0;
  x->caller = ws != NULL && x->ws == ws ? ws : NULL;
  if (x->rpc_id) json_decref(x->rpc_id);
  x->rpc_id = id ? json_incref(id) : NULL;
  if (req) ludo__http_req_set_data(req, x);
}

/* Takes the context back: the request (or NULL when it was aborted), the
 * WebSocket, the id (a reference for the caller). */
static void take(sv_sess_t *x, ludo__http_req_t **req, sv_ws_t **ws,
                 int *rpc_ws, json_t **id) {
  *req = x->req;
  *ws = x->rpc_ws ? x->caller : NULL;
  x->caller = NULL;
  *rpc_ws = x->rpc_ws;
  *id = x->rpc_id;
  x->req = NULL;
  x->rpc_id = NULL;
  if (*req) ludo__http_req_set_data(*req, NULL);
}

/* ---- tools ------------------------------------------------------------- */

/* The message of a failed tool call, text/n the error, into msg: unknown
 * tool and bad arguments without their code; a tool that raised, the
 * first line of its error without "ESCRIPT: ": the traceback after it
 * names the server's files and is for its log, not for clients. */
static void tool_error_text(int status, const char *text, size_t n,
                            char *msg, size_t size) {
  static const char *const codes[] = {"ENOENT: ", "ESCHEMA: ", "ESCRIPT: "};
  const char *nl;
  size_t i;
  for (i = 0; i < 3; i++) {
    size_t k = strlen(codes[i]);
    if (n >= k && memcmp(text, codes[i], k) == 0) {
      text += k;
      n -= k;
      break;
    }
  }
  if (status != LUDO_ESCHEMA && (nl = memchr(text, '\n', n)) != NULL)
    n = (size_t)(nl - text);
  snprintf(msg, size, "%s%.*s",
           status == LUDO_ESCHEMA ? "Invalid params: " : "",
           (int)(n < 900 ? n : 900), text);
}

static void tool_done(sv_sess_t *x, int status, const char *data,
                      size_t len) {
  ludo__serve_t *sv = x->sv;
  ludo__http_req_t *req;
  sv_ws_t *ws;
  int rpc_ws;
  json_t *id;
  take(x, &req, &ws, &rpc_ws, &id);
  sv_sess_release_slot(x); /* a stateless call's: free before the answer */
  if (req != NULL || ws != NULL) {
    if (status == 0) {
      sv_rpc_reply(sv, req, ws, rpc_ws, id, data, len);
    } else {
      char msg[1024];
      tool_error_text(status, data, len, msg, sizeof msg);
      /* The message is the tool's own text, which a tool may make look
       * like any limit ("ETIMEOUT: ..."); ludo's code in data says what
       * happened. */
      sv_rpc_error(sv, req, ws, rpc_ws, id,
                   status == LUDO_ENOENT || status == LUDO_ESCHEMA ? -32602
                                                                   : -32603,
                   msg, json_pack("{s:s}", "code", ludo__err_name(status)));
    }
  }
  if (id) json_decref(id);
  if (x->kind == SV_SESS_EPHEMERAL) sv_sess_close(x);
  if (ws) sv_ws_pump(ws);
}

/* The call of a throwaway session that just opened. */
static void tool_opened(sv_sess_t *x, int status, const char *data,
                        size_t len) {
  int rc;
  (void)data;
  (void)len;
  if (status != 0) {
    ludo__http_req_t *req;
    sv_ws_t *ws;
    int rpc_ws;
    json_t *id;
    take(x, &req, &ws, &rpc_ws, &id);
    sv_rpc_error(x->sv, req, ws, rpc_ws, id, -32000, "Environment factory "
                 "failed to create instance.", NULL);
    if (id) json_decref(id);
    return;
  }
  rc = sv_sess_call(x, LUDO__CALL_TOOL, x->pending, x->pending_len,
                    tool_done);
  if (rc != 0) tool_done(x, rc, "the call could not start", 24);
}

static void tools_list(ludo__serve_t *sv, ludo__http_req_t *req,
                       sv_ws_t *ws, int rpc_ws, json_t *id) {
  json_t *tools = json_object_get(sv->info, "tools"), *out, *t;
  size_t i;
  if (!json_is_array(tools)) {
    sv_rpc_error(sv, req, ws, rpc_ws, id, -32603,
                 "Environment does not support MCP", NULL);
    return;
  }
  out = json_array();
  json_array_foreach(tools, i, t) {
    json_array_append_new(
        out, json_pack("{s:O,s:O,s:O}", "name", json_object_get(t, "name"),
                       "description", json_object_get(t, "description"),
                       "inputSchema", json_object_get(t, "input_schema")));
  }
  reply_value(sv, req, ws, rpc_ws, id, json_pack("{s:o}", "tools", out));
}

static void tools_call(ludo__serve_t *sv, sv_sess_t *bound,
                       ludo__http_req_t *req, sv_ws_t *ws, int rpc_ws,
                       json_t *id, json_t *params) {
  json_t *name = json_object_get(params, "name");
  json_t *args = json_object_get(params, "arguments");
  json_t *sid = json_object_get(params, "session_id");
  sv_sess_t *x = bound;
  char *text;
  int rc, why;
  if (name != NULL && !json_is_null(name) && !json_is_string(name)) {
    sv_rpc_error(sv, req, ws, rpc_ws, id, -32602, "Invalid params: 'name' "
                 "must be a string", NULL);
    return;
  }
  if (!json_is_string(name)) {
    sv_rpc_error(sv, req, ws, rpc_ws, id, -32602, "Missing 'name' in params",
                 NULL);
    return;
  }
  if (sid != NULL && !json_is_null(sid) && !json_is_string(sid)) {
    /* not a session's name: never a throwaway session instead */
    sv_rpc_error(sv, req, ws, rpc_ws, id, -32602, "Invalid params: "
                 "'session_id' must be a string", NULL);
    return;
  }
  if (args != NULL && !json_is_null(args) && !json_is_object(args)) {
    sv_rpc_error(sv, req, ws, rpc_ws, id, -32602, "Invalid params: "
                 "arguments must be an object", NULL);
    return;
  }
  {
    json_t *call = json_pack("{s:O,s:o}", "name", name, "arguments",
                             json_is_object(args) ? json_incref(args)
                                                  : json_object());
    text = call ? json_dumps(call, JSON_COMPACT) : NULL;
    json_decref(call);
  }
  atomic_fetch_add(&sv->shared->metrics.tool_calls, 1);
  if (x == NULL && json_is_string(sid)) {
    char msg[160];
    int code;
    if (sv_fwd_tool(sv, req, ws, rpc_ws, id, json_string_value(sid), text,
                    text ? strlen(text) : 0, tool_done)) {
      free(text); /* another worker's session: passed on */
      return;
    }
    code = sv_check_tool(sv, json_string_value(sid), &x, msg, sizeof msg);
    if (code != 0) {
      sv_rpc_error(sv, req, ws, rpc_ws, id, code, msg, NULL);
      free(text);
      return;
    }
  }
  if (x != NULL) {
    keep(x, req, ws, rpc_ws, id);
    rc = sv_sess_call(x, LUDO__CALL_TOOL, text, text ? strlen(text) : 0,
                      tool_done);
    if (rc != 0) tool_done(x, rc, "the call could not start", 24);
    free(text);
    return;
  }
  x = sv_sess_open(sv, SV_SESS_EPHEMERAL, tool_opened, &why);
  if (x == NULL) {
    char msg[200];
    sv_capacity_text(sv, msg, sizeof msg);
    sv_rpc_error(sv, req, ws, rpc_ws, id, -32000,
                 why == LUDO_EBUSY ? msg
                 : why == LUDO_ECLOSED ? SV_SHUTTING_DOWN
                                       : "the server cannot open a session",
                 NULL);
    free(text);
    return;
  }
  keep(x, req, ws, rpc_ws, id);
  x->pending = text ? ludo__strndup(&sv->core->heap, text, strlen(text))
                    : NULL;
  x->pending_len = text ? strlen(text) : 0;
  free(text);
}

/* ---- sessions ---------------------------------------------------------- */

static void created(sv_sess_t *x, int status, const char *data, size_t len) {
  ludo__http_req_t *req;
  sv_ws_t *ws;
  int rpc_ws;
  json_t *id;
  (void)data;
  (void)len;
  take(x, &req, &ws, &rpc_ws, &id);
  if (status != 0) {
    const char *name = json_string_value(json_object_get(x->sv->info,
                                                         "name"));
    char msg[256];
    snprintf(msg, sizeof msg, "Environment factory '%s' failed to create "
             "instance.", name ? name : "?");
    sv_rpc_error(x->sv, req, ws, rpc_ws, id, -32000, msg,
                 json_pack("{s:s}", "factory_name", name ? name : "?"));
  } else {
    reply_value(x->sv, req, ws, rpc_ws, id,
                json_pack("{s:s}", "session_id", x->id));
  }
  if (id) json_decref(id);
}

static void session_create(ludo__serve_t *sv, sv_sess_t *bound,
                           ludo__http_req_t *req, sv_ws_t *ws, int rpc_ws,
                           json_t *id) {
  sv_sess_t *x;
  int why;
  if (bound != NULL) { /* inside a WebSocket session: that one */
    reply_value(sv, req, ws, rpc_ws, id,
                json_pack("{s:s}", "session_id", bound->id));
    return;
  }
  x = sv_sess_open(sv, SV_SESS_MCP, created, &why);
  if (x == NULL) {
    char msg[200];
    sv_capacity_text(sv, msg, sizeof msg);
    sv_rpc_error(sv, req, ws, rpc_ws, id, -32000,
                 why == LUDO_EBUSY ? msg
                 : why == LUDO_ECLOSED ? SV_SHUTTING_DOWN
                                       : "the server cannot open a session",
                 json_pack("{s:I,s:I}", "active_sessions",
                           (json_int_t)sv_active_sessions(sv),
                           "max_sessions", (json_int_t)sv->o.max_sessions));
    return;
  }
  keep(x, req, NULL, 0, id);
}

static void session_close(ludo__serve_t *sv, sv_sess_t *bound,
                          ludo__http_req_t *req, sv_ws_t *ws, int rpc_ws,
                          json_t *id, json_t *params) {
  json_t *sid = json_object_get(params, "session_id");
  char msg[200], *result;
  int code;
  if (sid == NULL || json_is_null(sid)) {
    sv_rpc_error(sv, req, ws, rpc_ws, id, -32602, "Invalid params - "
                 "'session_id' is required", NULL);
    return;
  }
  if (!json_is_string(sid)) {
    sv_rpc_error(sv, req, ws, rpc_ws, id, -32602, "Invalid params - "
                 "'session_id' must be a string", NULL);
    return;
  }
  if (bound != NULL && strcmp(bound->id, json_string_value(sid)) == 0) {
    sv_rpc_error(sv, req, ws, rpc_ws, id, -32600, "Cannot close active "
                 "WebSocket-managed session via MCP method", NULL);
    return;
  }
  if (sv_fwd_close(sv, bound, req, ws, rpc_ws, id, json_string_value(sid)))
    return; /* another worker's session: passed on */
  code = sv_close_named(sv, json_string_value(sid), &result, msg,
                        sizeof msg);
  if (code != 0) {
    sv_rpc_error(sv, req, ws, rpc_ws, id, code, msg, NULL);
    return;
  }
  sv_rpc_reply(sv, req, ws, rpc_ws, id, result, strlen(result));
  free(result);
}

/* ---- MCP's handshake ---------------------------------------------------- */

static void initialize(ludo__serve_t *sv, ludo__http_req_t *req,
                       sv_ws_t *ws, int rpc_ws, json_t *id, json_t *params) {
  const char *want = json_string_value(json_object_get(params,
                                                       "protocolVersion"));
  const char *version = versions[0];
  size_t i;
  json_t *caps;
  for (i = 0; want && i < sizeof versions / sizeof *versions; i++)
    if (strcmp(want, versions[i]) == 0) version = versions[i];
  /* MCP clients list the tools of a server that offers them: an
   * environment without tools offers none (tools/list answers it as
   * OpenEnv does, "Environment does not support MCP"). */
  caps = json_is_array(json_object_get(sv->info, "tools"))
             ? json_pack("{s:{s:b}}", "tools", "listChanged", 0)
             : json_object();
  reply_value(
      sv, req, ws, rpc_ws, id,
      json_pack("{s:s,s:o,s:{s:O,s:O},s:O}", "protocolVersion", version,
                "capabilities", caps, "serverInfo", "name",
                json_object_get(sv->info, "name"), "version",
                json_object_get(sv->info, "version"), "instructions",
                json_object_get(sv->info, "description")));
}

/* ---- the request ----------------------------------------------------- */

/* Checks the envelope: 0, or -1 after answering -32600 (id null). */
static int check_request(ludo__serve_t *sv, json_t *r, ludo__http_req_t *req,
                         sv_ws_t *ws, int rpc_ws) {
  const char *k, *why = NULL;
  json_t *v;
  char msg[200];
  json_object_foreach(r, k, v) {
    if (strcmp(k, "jsonrpc") && strcmp(k, "method") && strcmp(k, "params") &&
        strcmp(k, "id")) {
      snprintf(msg, sizeof msg, "Invalid request: unknown field '%.64s'", k);
      why = msg;
      break;
    }
  }
  v = json_object_get(r, "jsonrpc");
  if (why == NULL && !(json_is_string(v) &&
                       strcmp(json_string_value(v), "2.0") == 0))
    why = "Invalid request: 'jsonrpc' must be \"2.0\"";
  if (why == NULL && !json_is_string(json_object_get(r, "method")))
    why = "Invalid request: 'method' must be a string";
  v = json_object_get(r, "params");
  if (why == NULL && v != NULL && !json_is_object(v))
    why = "Invalid request: 'params' must be an object";
  v = json_object_get(r, "id");
  if (why == NULL && v != NULL && !json_is_string(v) &&
      !json_is_integer(v) && !json_is_null(v))
    why = "Invalid request: 'id' must be a string, an integer or null";
  if (why == NULL) return 0;
  sv_rpc_error(sv, req, ws, rpc_ws, NULL, -32600, why, NULL);
  return -1;
}

/* 1 when r is a JSON-RPC response (an id, a result or an error, no
 * method): MCP's transport acknowledges it with 202 and no body. */
static int is_response(json_t *r) {
  json_t *v = json_object_get(r, "jsonrpc");
  return json_is_string(v) && strcmp(json_string_value(v), "2.0") == 0 &&
         json_object_get(r, "method") == NULL &&
         json_object_get(r, "id") != NULL &&
         (json_object_get(r, "result") != NULL) !=
             (json_object_get(r, "error") != NULL);
}

/* Handles the request object r (a message, or a member of a batch).
 * Returns 1 when it has a reply (sent now, or when its call ends), 0 when
 * none is due: a notification or a client's response. */
static int handle_one(ludo__serve_t *sv, sv_sess_t *x, ludo__http_req_t *req,
                      sv_ws_t *ws, int rpc_ws, json_t *r) {
  json_t *id, *params, *empty = NULL;
  const char *m;
  if (!json_is_object(r)) {
    sv_rpc_error(sv, req, ws, rpc_ws, NULL, -32600, "Invalid request: a "
                 "request must be a JSON object", NULL);
    return 1;
  }
  if (is_response(r)) return 0; /* a client's answer: none asked here */
  if (check_request(sv, r, req, ws, rpc_ws) != 0) return 1;
  m = json_string_value(json_object_get(r, "method"));
  id = json_object_get(r, "id");
  if (id == NULL) return 0; /* a notification (MCP; JSON-RPC 2.0) */
  params = json_object_get(r, "params");
  if (params == NULL) params = empty = json_object();
  if (strcmp(m, "tools/list") == 0) {
    tools_list(sv, req, ws, rpc_ws, id);
  } else if (strcmp(m, "tools/call") == 0) {
    tools_call(sv, x, req, ws, rpc_ws, id, params);
  } else if (strcmp(m, "initialize") == 0) {
    initialize(sv, req, ws, rpc_ws, id, params);
  } else if (strcmp(m, "ping") == 0) {
    reply_value(sv, req, ws, rpc_ws, id, json_object());
  } else if (strcmp(m, "openenv/session/create") == 0) {
    session_create(sv, x, req, ws, rpc_ws, id);
  } else if (strcmp(m, "openenv/session/close") == 0) {
    session_close(sv, x, req, ws, rpc_ws, id, params);
  } else {
    char msg[160];
    snprintf(msg, sizeof msg, "Method not found: %.100s", m);
    sv_rpc_error(sv, req, ws, rpc_ws, id, -32601, msg, NULL);
  }
  json_decref(empty);
  return 1;
}

/* ---- batches (continued) ---------------------------------------------- */

static void batch_free(sv_batch_t *b) {
  ludo__serve_t *sv = b->sv;
  if (b->ws != NULL) {
    b->ws->batch = NULL;
  } else {
    if (b->prev_b) b->prev_b->next_b = b->next_b;
    else sv->batches = b->next_b;
    if (b->next_b) b->next_b->prev_b = b->prev_b;
  }
  ludo__core_unpost(sv->core, &b->go_on);
  json_decref(b->members);
  ludo__buf_free(&b->out);
  ludo__free(&sv->core->heap, b, sizeof *b);
}

/* Every member has its reply: the array goes (202 and no body over HTTP,
 * nothing over a WebSocket, when all were notifications). `later`: from
 * a reply that came after the batch's message was handled, when the
 * messages a WebSocket client sent since wait for it. */
static void batch_end(sv_batch_t *b, int later) {
  ludo__serve_t *sv = b->sv;
  ludo__http_req_t *req = b->req;
  sv_ws_t *ws = b->ws;
  if (!b->oom && b->replies > 0 && ludo__buf_addc(&b->out, ']') != 0)
    b->oom = 1;
  if (req != NULL) {
    if (b->oom) sv_respond_detail(sv, req, 500, "out of memory");
    else if (b->replies == 0) sv_respond(sv, req, 202, NULL, 0, NULL, 0);
    else sv_respond_json(sv, req, 200, b->out.p, b->out.len, NULL, 0);
  } else if (b->oom) {
    sv_ws_close(ws, 1011, "out of memory");
  } else if (b->replies > 0) {
    sv_ws_send(ws, b->out.p, b->out.len);
  }
  batch_free(b);
  if (ws != NULL && later) sv_ws_pump(ws);
  if (sv->draining) sv_drain_check(sv); /* it waited for this batch */
}

/* Runs the members from b->next on, until one's reply is to come later
 * (its call runs) or all are answered. */
static void batch_run(sv_batch_t *b, int later) {
  size_t n = json_array_size(b->members);
  b->running = 1;
  while (b->next < n) {
    json_t *r = json_array_get(b->members, b->next++);
    if (b->ws != NULL && (b->ws->closing || b->ws->sess == NULL)) {
      b->running = 0; /* the client leaves: on_close frees the batch */
      return;
    }
    b->waiting = 1;
    if (!handle_one(b->sv, b->ws ? b->ws->sess : NULL, b->req, b->ws,
                    b->ws ? 1 : 0, r))
      b->waiting = 0;
    if (b->waiting) { /* batch_add goes on when the reply comes */
      b->running = 0;
      return;
    }
  }
  b->running = 0;
  batch_end(b, later);
}

/* The loop's turn after a reply that came later: the next members run
 * once the call that replied has ended entirely (a throwaway session
 * closed, its slot given back), as the next request would. */
static void batch_go_on(ludo__task_t *t) {
  batch_run((sv_batch_t *)((char *)t - offsetof(sv_batch_t, go_on)), 1);
}

static void batch_add(sv_batch_t *b, const char *body, size_t len) {
  if (body == NULL ||
      ludo__buf_addc(&b->out, b->replies > 0 ? ',' : '[') != 0 ||
      ludo__buf_add(&b->out, body, len) != 0)
    b->oom = 1;
  else
    b->replies++;
  b->waiting = 0;
  if (!b->running) ludo__core_post(b->sv->core, &b->go_on);
}

/* Starts answering the batch r (an array) of a POST /mcp (req) or WS /mcp
 * (ws, rpc_ws 1) message. */
static void batch_start(ludo__serve_t *sv, ludo__http_req_t *req,
                        sv_ws_t *ws, int rpc_ws, json_t *r) {
  size_t n = json_array_size(r);
  sv_batch_t *b;
  char msg[160];
  if (n == 0 || n > SV_MCP_BATCH_MAX || (ws != NULL && rpc_ws != 1)) {
    if (n == 0)
      snprintf(msg, sizeof msg, "Invalid request: an empty batch");
    else if (n > SV_MCP_BATCH_MAX)
      snprintf(msg, sizeof msg, "Invalid request: a batch of %zu requests "
               "(at most %d)", n, SV_MCP_BATCH_MAX);
    else
      snprintf(msg, sizeof msg, "Invalid request: a request must be a JSON "
               "object");
    sv_rpc_error(sv, req, ws, rpc_ws, NULL, -32600, msg, NULL);
    return;
  }
  b = ludo__calloc(&sv->core->heap, sizeof *b);
  if (b == NULL) {
    send_rpc(sv, req, ws, rpc_ws, NULL, 0);
    return;
  }
  b->sv = sv;
  b->members = json_incref(r);
  b->req = ws ? NULL : req;
  b->ws = ws;
  b->go_on.fn = batch_go_on;
  ludo__buf_init(&b->out, ludo__alloc_fn, &sv->core->heap);
  if (ws != NULL) {
    ws->batch = b;
  } else {
    b->next_b = sv->batches;
    if (sv->batches) sv->batches->prev_b = b;
    sv->batches = b;
  }
  batch_run(b, 0);
}

void sv_mcp_batch_free(sv_batch_t *b) {
  if (b != NULL) batch_free(b);
}

void sv_mcp_abort(ludo__serve_t *sv, ludo__http_req_t *req) {
  sv_batch_t *b = batch_of(sv, req, NULL, 0);
  if (b != NULL) batch_free(b);
}

/* ---- the message ------------------------------------------------------ */

/* Answers a text with a number out of ludo's range (valid JSON,
 * docs/json.md): the error names where it is. */
static void out_of_range(ludo__serve_t *sv, ludo__http_req_t *req,
                         sv_ws_t *ws, int rpc_ws, json_t *entry) {
  json_t *loc = json_object_get(entry, "loc"), *v;
  const char *what = json_string_value(json_object_get(entry, "msg"));
  char path[200], msg[400];
  size_t i, at = 0;
  int params = json_is_string(json_array_get(loc, 0)) &&
               strcmp(json_string_value(json_array_get(loc, 0)),
                      "params") == 0;
  path[0] = '\0';
  json_array_foreach(loc, i, v) {
    if (at >= sizeof path) break;
    if (json_is_integer(v))
      at += (size_t)snprintf(path + at, sizeof path - at, "[%lld]",
                             (long long)json_integer_value(v));
    else
      at += (size_t)snprintf(path + at, sizeof path - at, "%s%.64s",
                             at ? "." : "", json_string_value(v));
  }
  snprintf(msg, sizeof msg, "%s: %s: %s",
           params ? "Invalid params" : "Invalid request",
           path[0] ? path : "the request", what ? what : "");
  sv_rpc_error(sv, req, ws, rpc_ws, NULL, params ? -32602 : -32600, msg,
               json_pack("{s:[O]}", "errors", entry));
}

void sv_mcp_handle(ludo__serve_t *sv, sv_sess_t *x, ludo__http_req_t *req,
                   sv_ws_t *ws, int rpc_ws, const char *data, size_t len) {
  json_error_t err;
  json_t *r = sv_json_load(sv, data, len, &err);
  if (r == NULL && (r = sv_json_limit_error(sv, data, len, NULL)) != NULL) {
    /* JSON, with a number beyond ludo's range (an id, an argument): not
     * a parse error */
    out_of_range(sv, req, ws, rpc_ws, r);
  } else if (r == NULL) {
    sv_rpc_error(sv, req, ws, rpc_ws, NULL, -32700, "Parse error", NULL);
    return;
  } else if (json_is_array(r)) {
    batch_start(sv, req, ws, rpc_ws, r);
  } else if (!handle_one(sv, x, req, ws, rpc_ws, r) && req != NULL) {
    sv_respond(sv, req, 202, NULL, 0, NULL, 0);
  }
  json_decref(r);
}
