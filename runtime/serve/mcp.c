/* mcp.c - JSON-RPC 2.0 for POST /mcp, WS /mcp and /ws {"type":"mcp"}
 * frames: OpenEnv's methods (tools/list, tools/call,
 * openenv/session/create, openenv/session/close) with its error codes,
 * and MCP's own handshake (initialize with version negotiation,
 * notifications, ping) so MCP clients connect too (docs/protocol.md). */
#include "serve/internal.h"

#include "base/errors.h"

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

static void send_rpc(ludo__serve_t *sv, ludo__http_req_t *req, sv_ws_t *ws,
                     int rpc_ws, const char *body, size_t len) {
  if (req != NULL) {
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
  else if (req)
    sv_respond_detail(sv, req, 500, "out of memory");
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
  if (text) send_rpc(sv, req, ws, rpc_ws, text, strlen(text));
  else if (req) sv_respond_detail(sv, req, 500, "out of memory");
  free(text);
  json_decref(v);
}

/* Replies with the JSON of `v` (taken). */
static void reply_value(ludo__serve_t *sv, ludo__http_req_t *req,
                        sv_ws_t *ws, int rpc_ws, json_t *id, json_t *v) {
  char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
  if (text) sv_rpc_reply(sv, req, ws, rpc_ws, id, text, strlen(text));
  else if (req) sv_respond_detail(sv, req, 500, "out of memory");
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
  if (!json_is_string(name)) {
    sv_rpc_error(sv, req, ws, rpc_ws, id, -32602, "Missing 'name' in params",
                 NULL);
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
                           (json_int_t)atomic_load(&sv->shared->open),
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
  if (!json_is_string(sid)) {
    sv_rpc_error(sv, req, ws, rpc_ws, id, -32602, "Invalid params - "
                 "'session_id' is required", NULL);
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
  for (i = 0; want && i < sizeof versions / sizeof *versions; i++)
    if (strcmp(want, versions[i]) == 0) version = versions[i];
  reply_value(
      sv, req, ws, rpc_ws, id,
      json_pack("{s:s,s:{s:{s:b}},s:{s:O,s:O},s:O}", "protocolVersion",
                version, "capabilities", "tools", "listChanged", 0,
                "serverInfo", "name", json_object_get(sv->info, "name"),
                "version", json_object_get(sv->info, "version"),
                "instructions", json_object_get(sv->info, "description")));
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

void sv_mcp_handle(ludo__serve_t *sv, sv_sess_t *x, ludo__http_req_t *req,
                   sv_ws_t *ws, int rpc_ws, const char *data, size_t len) {
  json_error_t err;
  json_t *r = sv_json_load(sv, data, len, &err),
         *id, *params, *empty = NULL;
  const char *m;
  if (r == NULL && strstr(err.text, "too big") != NULL) {
    /* JSON, with an integer (an id, say) beyond 64 bits, which the
     * server cannot echo exactly: not a parse error. */
    sv_rpc_error(sv, req, ws, rpc_ws, NULL, -32600, "Invalid request: an "
                 "integer beyond 64 bits (ids are strings or integers of "
                 "at most 64 bits here)", NULL);
    return;
  }
  if (r == NULL) {
    sv_rpc_error(sv, req, ws, rpc_ws, NULL, -32700, "Parse error", NULL);
    return;
  }
  if (!json_is_object(r)) {
    sv_rpc_error(sv, req, ws, rpc_ws, NULL, -32600, "Invalid request: a "
                 "request must be a JSON object", NULL);
    json_decref(r);
    return;
  }
  if (is_response(r)) { /* a client's answer: none asked here, none due */
    if (req) ludo__http_respond(req, 202, NULL, 0, NULL, 0);
    json_decref(r);
    return;
  }
  if (check_request(sv, r, req, ws, rpc_ws) != 0) {
    json_decref(r);
    return;
  }
  m = json_string_value(json_object_get(r, "method"));
  id = json_object_get(r, "id");
  params = json_object_get(r, "params");
  if (params == NULL) params = empty = json_object();
  if (id == NULL) { /* a notification: no reply (MCP; JSON-RPC 2.0) */
    if (req) ludo__http_respond(req, 202, NULL, 0, NULL, 0);
  } else if (strcmp(m, "tools/list") == 0) {
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
  json_decref(r);
}
