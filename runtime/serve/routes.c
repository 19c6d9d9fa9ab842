/* routes.c - the HTTP routes of the server (docs/protocol.md): /health,
 * /metadata, /schema, /openapi.json, /metrics, POST /mcp, and in
 * simulation mode /reset, /step and /state on named or throwaway
 * sessions. */
#include "serve/internal.h"

#include "base/utf8.h"

#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SESSION_HEADER "X-Session-Id"

static const char reset_schema[] =
    "{\"additionalProperties\":true,\"properties\":{\"episode_id\":{"
    "\"anyOf\":[{\"maxLength\":255,\"type\":\"string\"},{\"type\":\"null\"}"
    "]},\"seed\":{\"anyOf\":[{\"minimum\":0,\"type\":\"integer\"},{\"type\":"
    "\"null\"}]}},\"title\":\"ResetRequest\",\"type\":\"object\"}";

json_t *sv_jstr(const char *s, size_t n) {
  ludo__buf_t b;
  json_t *v;
  size_t at = 0, ok;
  if (n == (size_t)-1) n = strlen(s);
  if (ludo__utf8_check(s, n) == n) return json_stringn(s, n);
  ludo__buf_init(&b, ludo__alloc_default, NULL);
  while (at < n) {
    ok = ludo__utf8_check(s + at, n - at);
    if (ludo__buf_add(&b, s + at, ok) != 0) break;
    at += ok;
    if (at < n) {
      if (ludo__buf_add(&b, "\xef\xbf\xbd", 3) != 0) break;
      at++;
    }
  }
  v = at >= n ? json_stringn(b.p ? b.p : "", b.len) : NULL;
  ludo__buf_free(&b);
  return v;
}

int sv_unescape(const char *p, size_t n, int plus, char *out, size_t size) {
  size_t i, k = 0;
  for (i = 0; i < n; i++) {
    char c = p[i];
    if (c == '%' && i + 2 < n && isxdigit((unsigned char)p[i + 1]) &&
        isxdigit((unsigned char)p[i + 2])) {
      char hex[3] = {p[i + 1], p[i + 2], '\0'};
      c = (char)strtol(hex, NULL, 16);
      i += 2;
    } else if (c == '+' && plus) {
      c = ' ';
    }
    if (c == '\0' || k + 1 >= size) return -1;
    out[k++] = c;
  }
  out[k] = '\0';
  return 0;
}

const char *sv_query_value(const char *q, const char *key, char *buf,
                           size_t n) {
  size_t klen = strlen(key);
  while (q && *q) {
    const char *amp = strchr(q, '&');
    size_t len = amp ? (size_t)(amp - q) : strlen(q);
    if (len > klen && q[klen] == '=' && memcmp(q, key, klen) == 0) {
      if (sv_unescape(q + klen + 1, len - klen - 1, 1, buf, n) != 0)
        snprintf(buf, n, "%.*s", (int)(len - klen - 1), q + klen + 1);
      return buf;
    }
    q = amp ? amp + 1 : NULL;
  }
  return NULL;
}

void sv_respond(ludo__serve_t *sv, ludo__http_req_t *req, int status,
                const ludo__http_header_t *h, size_t n, const void *body,
                size_t len) {
  /* Once the server stops, every answer ends its connection, which the
   * drain is about to close: a keep-alive client is told so and does not
   * send its next request into a closing socket. */
  if (sv->closing) ludo__http_req_close_after(req);
  ludo__http_respond(req, status, h, n, body, len);
}

void sv_respond_json(ludo__serve_t *sv, ludo__http_req_t *req, int status,
                     const char *body, size_t len,
                     const ludo__http_header_t *h, size_t n) {
  ludo__http_header_t all[4];
  size_t i, k = 0;
  all[k].name = "Content-Type";
  all[k++].value = "application/json";
  for (i = 0; i < n && k < 4; i++) all[k++] = h[i];
  atomic_fetch_add(&sv->shared->metrics.bytes_out, len);
  if (status >= 500)
    ludo__metrics_proto(&sv->shared->metrics, LUDO__MERR_HTTP_5XX);
  else if (status >= 400)
    ludo__metrics_proto(&sv->shared->metrics, LUDO__MERR_HTTP_4XX);
  sv_respond(sv, req, status, all, k, body, len);
}

/* Answers the JSON of `v` (a new reference, taken). */
static void respond_value(ludo__serve_t *sv, ludo__http_req_t *req,
                          int status, json_t *v,
                          const ludo__http_header_t *h, size_t n) {
  char *text = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
  if (text == NULL) {
    sv_respond_json(sv, req, 500, "{\"detail\":\"out of memory\"}", 27,
                    NULL, 0);
  } else {
    sv_respond_json(sv, req, status, text, strlen(text), h, n);
    free(text);
  }
  json_decref(v);
}

void sv_respond_405(ludo__serve_t *sv, ludo__http_req_t *req,
                    const char *allow) {
  ludo__http_header_t h = {"Allow", allow};
  sv_respond_json(sv, req, 405, "{\"detail\":\"Method Not Allowed\"}", 31,
                  &h, 1);
}

void sv_respond_detail(ludo__serve_t *sv, ludo__http_req_t *req, int status,
                       const char *msg) {
  respond_value(sv, req, status, json_pack("{s:o}", "detail", sv_jstr(msg,
                (size_t)-1)), NULL, 0);
}

/* ---- validation errors in pydantic's shape ------------------------------ */

/* Appends the parts of a ludo path ("tags[0].x") to loc. */
static void add_path(json_t *loc, const char *p, size_t n) {
  size_t i = 0;
  while (i < n) {
    if (p[i] == '.') {
      i++;
      continue;
    }
    if (p[i] == '[') {
      size_t j = i + 1;
      while (j < n && p[j] != ']') j++;
      json_array_append_new(loc, json_integer(strtoll(p + i + 1, NULL, 10)));
      i = j + 1;
      continue;
    }
    {
      size_t j = i;
      while (j < n && p[j] != '.' && p[j] != '[') j++;
      json_array_append_new(loc, sv_jstr(p + i, j - i));
      i = j;
    }
  }
}

/* pydantic's error types for the schema checker's messages (the text
 * after the path): a field named in quotes is added to loc, as pydantic
 * puts the missing or extra field there. `msg` stays ludo's text, which
 * says what came ("expected string, got integer"); pydantic's own words
 * (a tool action's checks) give pydantic's type; a message of another
 * kind is a value_error. */
static const struct {
  const char *start, *type;
} kinds[] = {
    {"missing required field '", "missing"},
    {"unknown field '", "extra_forbidden"},
    {"expected integer, got ", "int_type"},
    {"expected string, got ", "string_type"},
    {"expected number, got ", "float_type"},
    {"expected boolean, got ", "bool_type"},
    {"expected object, got ", "dict_type"},
    {"expected array, got ", "list_type"},
    /* the tool actions' checks (lua/ludo/tools.lua) speak pydantic's */
    {"Field required", "missing"},
    {"Extra inputs are not permitted", "extra_forbidden"},
    {"Input should be a valid string", "string_type"},
    {"Input should be a valid dictionary", "dict_type"},
};

/* The entry for `what` (the message after its path), loc completed. */
static json_t *error_entry(json_t *loc, const char *what, size_t n) {
  const char *type = "value_error";
  size_t i;
  for (i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    size_t k = strlen(kinds[i].start);
    if (n < k || memcmp(what, kinds[i].start, k) != 0) continue;
    if (kinds[i].start[k - 1] == '\'') { /* the field, up to its quote */
      const char *q = memchr(what + k, '\'', n - k);
      if (q == NULL) break;
      json_array_append_new(loc, sv_jstr(what + k, (size_t)(q - what - k)));
    }
    type = kinds[i].type;
    break;
  }
  return json_pack("[{s:s,s:o,s:o,s:n}]", "type", type, "loc", loc, "msg",
                   sv_jstr(what, n), "input");
}

json_t *sv_validation_errors(const char *msg, size_t len,
                             const char *prefix) {
  json_t *loc = json_array();
  const char *p = msg, *end = msg + len, *colon;
  if (prefix) json_array_append_new(loc, json_string(prefix));
  if (len > 9 && memcmp(p, "ESCHEMA: ", 9) == 0) p += 9;
  /* "action.a.b: what": the path's first part names the value itself */
  colon = memchr(p, ':', (size_t)(end - p));
  if (colon != NULL && memchr(p, ' ', (size_t)(colon - p)) == NULL) {
    const char *dot = p;
    while (dot < colon && *dot != '.' && *dot != '[') dot++;
    if (dot < colon) add_path(loc, dot, (size_t)(colon - dot));
    p = colon + 1;
    while (p < end && *p == ' ') p++;
  }
  return error_entry(loc, p, (size_t)(end - p));
}

static void respond_422(ludo__serve_t *sv, ludo__http_req_t *req,
                        json_t *errors) {
  respond_value(sv, req, 422, json_pack("{s:o}", "detail", errors), NULL, 0);
}

/* One pydantic-style error entry, loc ["body", where] (where NULL:
 * ["body"]). */
static json_t *field_error(const char *type, const char *where,
                           const char *msg, json_t *input) {
  return sv_field_error(type, "body", where, msg, input);
}

/* ---- read-only routes ------------------------------------------------- */

static void route_metadata(ludo__serve_t *sv, ludo__http_req_t *req) {
  json_t *i = sv->info;
  respond_value(sv, req, 200,
                json_pack("{s:O,s:O,s:O,s:O,s:O,s:O}", "name",
                          json_object_get(i, "name"), "description",
                          json_object_get(i, "description"), "readme_content",
                          json_object_get(i, "readme_content"), "version",
                          json_object_get(i, "version"), "author",
                          json_object_get(i, "author"), "documentation_url",
                          json_object_get(i, "documentation_url")),
                NULL, 0);
}

static void route_schema(ludo__serve_t *sv, ludo__http_req_t *req) {
  json_t *i = sv->info;
  json_t *reset = json_loads(reset_schema, 0, NULL);
  respond_value(sv, req, 200,
                json_pack("{s:O,s:O,s:O,s:o}", "action",
                          json_object_get(i, "action"), "observation",
                          json_object_get(i, "observation"), "state",
                          json_object_get(i, "state"), "reset", reset),
                NULL, 0);
}

static void add_path_item(json_t *paths, const char *path,
                          const char *method, const char *summary) {
  json_t *item = json_object_get(paths, path);
  if (item == NULL) {
    item = json_object();
    json_object_set_new(paths, path, item);
  }
  json_object_set_new(
      item, method,
      json_pack("{s:s,s:{s:{s:s}}}", "summary", summary, "responses", "200",
                "description", "Successful Response"));
}

static void route_openapi(ludo__serve_t *sv, ludo__http_req_t *req) {
  json_t *paths = json_object();
  add_path_item(paths, "/health", "get", "Health");
  add_path_item(paths, "/metadata", "get", "Environment metadata");
  add_path_item(paths, "/schema", "get", "Action, observation, state and "
                "reset schemas");
  add_path_item(paths, "/mcp", "post", "MCP JSON-RPC 2.0");
  add_path_item(paths, "/metrics", "get", "Prometheus metrics");
  if (!sv->o.production) {
    add_path_item(paths, "/reset", "post", "Reset a session (named by "
                  "X-Session-Id, else a new one)");
    add_path_item(paths, "/step", "post", "Step a session (named by "
                  "X-Session-Id, else a throwaway one)");
    add_path_item(paths, "/state", "get", "State of a session (named by "
                  "X-Session-Id, else a throwaway one)");
  }
  sv_tasks_openapi(sv, paths);
  respond_value(sv, req, 200,
                json_pack("{s:s,s:{s:s,s:s,s:O},s:o}", "openapi", "3.1.0",
                          "info", "title", "OpenEnv Environment HTTP API",
                          "version", "1.0.0", "description",
                          json_object_get(sv->info, "description"), "paths",
                          paths),
                NULL, 0);
}

static void route_metrics(ludo__serve_t *sv, ludo__http_req_t *req) {
  static const ludo__http_header_t h[] = {
      {"Content-Type", "text/plain; version=0.0.4; charset=utf-8"}};
  ludo__buf_t b;
  ludo__buf_init(&b, ludo__alloc_fn, &sv->core->heap);
  if (ludo__metrics_render(&sv->shared->metrics, &b) != 0) {
    ludo__buf_free(&b);
    sv_respond_detail(sv, req, 500, "out of memory");
    return;
  }
  sv_respond(sv, req, 200, h, 1, b.p, b.len);
  ludo__buf_free(&b);
}

/* ---- simulation routes ------------------------------------------------ */

/* The session id a request names, first found of: the X-Session-Id
 * header, the body's session_id (`body_id`, NULL: none), the query's
 * session_id. NULL when none. Copied into buf. */
static const char *named_session(ludo__http_req_t *req, const char *body_id,
                                 char *buf, size_t n) {
  const char *h = ludo__http_req_header(req, SESSION_HEADER);
  if (h != NULL && *h) {
    snprintf(buf, n, "%s", h);
    return buf;
  }
  if (body_id != NULL) {
    snprintf(buf, n, "%s", body_id);
    return buf;
  }
  return sv_query_value(ludo__http_req_query(req), "session_id", buf, n);
}

/* Takes the body's session_id out of `body` into buf: *id is buf, or
 * NULL when absent or null. Returns 0, or -1 after answering 422 when it
 * is not a string (it would name no session: never a throwaway session
 * in its place). */
static int body_session_id(ludo__serve_t *sv, ludo__http_req_t *req,
                           json_t *body, char *buf, size_t n,
                           const char **id) {
  json_t *v = json_object_get(body, "session_id");
  *id = NULL;
  if (v == NULL) return 0;
  if (!json_is_null(v) && !json_is_string(v)) {
    respond_422(sv, req, field_error("string_type", "session_id", "Input "
                                     "should be a valid string", v));
    return -1;
  }
  if (json_is_string(v)) {
    snprintf(buf, n, "%s", json_string_value(v));
    *id = buf;
  }
  json_object_del(body, "session_id");
  return 0;
}

/* The body as a JSON object (an empty body: {}; null: {} for a reset,
 * whose body has a default, as FastAPI's Body(default_factory=...));
 * NULL after answering 422 when it is not one. */
static json_t *body_object(ludo__serve_t *sv, ludo__http_req_t *req,
                           int reset) {
  size_t len;
  const char *body = ludo__http_req_body(req, &len);
  json_error_t err;
  json_t *v;
  if (len == 0) return json_object();
  v = sv_json_load(sv, body, len, &err);
  if (v == NULL && (v = sv_json_limit_error(sv, body, len, "body")) != NULL) {
    respond_422(sv, req, json_pack("[o]", v)); /* JSON, past a limit */
    return NULL;
  }
  if (v == NULL) {
    char msg[300];
    snprintf(msg, sizeof msg, "JSON decode error: %s", err.text);
    respond_422(sv, req,
                json_pack("[{s:s,s:[s,i],s:s,s:{}}]", "type", "json_invalid",
                          "loc", "body", err.position, "msg", msg, "ctx"));
    return NULL;
  }
  if (json_is_null(v) && reset) {
    json_decref(v);
    return json_object();
  }
  if (json_is_null(v)) { /* FastAPI: a required body that is null */
    respond_422(sv, req, field_error("missing", NULL, "Field required",
                                     NULL));
    return NULL;
  }
  if (!json_is_object(v)) {
    respond_422(sv, req, field_error("model_attributes_type", NULL,
                                     "Input should be a valid dictionary "
                                     "or object to extract fields from",
                                     v));
    json_decref(v);
    return NULL;
  }
  return v;
}

/* The answer to a finished HTTP call (x->req may be gone). */
static void http_done(sv_sess_t *x, int status, const char *data,
                      size_t len) {
  ludo__serve_t *sv = x->sv;
  ludo__http_req_t *req = x->req;
  ludo__http_header_t h[1];
  size_t nh = 0;
  x->req = NULL;
  sv_sess_release_slot(x); /* a stateless call's: free before the answer */
  if (x->kind == SV_SESS_HTTP) {
    h[0].name = SESSION_HEADER;
    h[0].value = x->id;
    nh = 1;
  }
  if (req != NULL) {
    ludo__http_req_set_data(req, NULL);
    if (status == 0) {
      if (x->call == LUDO__CALL_RESET)
        atomic_fetch_add(&sv->shared->metrics.resets, 1);
      else if (x->call == LUDO__CALL_STEP)
        ludo__metrics_step(&sv->shared->metrics, sv_now_us() - x->t0_us);
      sv_respond_json(sv, req, 200, data, len, h, nh);
    } else if (status == LUDO_ESCHEMA) {
      /* A reset's options are the body's fields (loc ["body", field],
       * as the seed's); an action's errors are relative to the action. */
      respond_422(sv, req, sv_validation_errors(
                               data, len, x->call == LUDO__CALL_RESET
                                              ? "body" : NULL));
    } else if (status == LUDO_ETOOBIG) {
      sv_respond_detail(sv, req, 413, data);
    } else {
      char msg[1024];
      snprintf(msg, sizeof msg, "%.*s", (int)(len < 1000 ? len : 1000), data);
      sv_respond_detail(sv, req, 500, msg);
    }
  }
  if (x->kind == SV_SESS_EPHEMERAL) sv_sess_close(x);
}

/* Answers a request whose call could not start (rc, a LUDO_E* code): a
 * server shutting down says so (503), as for a request after the stop. */
static void refuse_start(ludo__serve_t *sv, ludo__http_req_t *req, int rc) {
  if (rc == LUDO_ECLOSED && sv->closing) {
    ludo__http_req_close_after(req);
    sv_respond_detail(sv, req, 503, SV_SHUTTING_DOWN);
  } else {
    sv_respond_detail(sv, req, 500, "the call could not start");
  }
}

/* Runs the pending call of a session that just opened. */
static void opened_then_call(sv_sess_t *x, int status, const char *data,
                             size_t len) {
  int rc;
  if (status != 0) {
    if (x->req) {
      ludo__http_req_set_data(x->req, NULL);
      sv_respond_detail(x->sv, x->req, 500, "Environment factory failed to "
                        "create instance.");
      x->req = NULL;
    }
    return;
  }
  (void)data;
  (void)len;
  rc = sv_sess_call(x, x->call, x->pending, x->pending_len, http_done);
  if (rc != 0) {
    ludo__http_req_t *req = x->req;
    x->req = NULL;
    if (req) {
      ludo__http_req_set_data(req, NULL);
      refuse_start(x->sv, req, rc);
    }
    sv_sess_close(x); /* made for this request, its id never sent */
  }
}

/* Starts call `kind` with `input` (copied; NULL: none) and the wall
 * limit wall_ms (0: the runtime's) on the named session, or a new one of
 * `kind_new` when `id` is NULL. */
static void run_on_session(ludo__serve_t *sv, ludo__http_req_t *req,
                           const char *id, int kind, int kind_new,
                           const char *input, size_t len, uint32_t wall_ms) {
  sv_sess_t *x;
  int why, rc;
  if (id != NULL) {
    char msg[200];
    int st;
    if (sv_fwd_http(sv, req, id, kind, input, len, wall_ms, http_done))
      return; /* another worker's session: passed on */
    st = sv_check_http(sv, id, &x, msg, sizeof msg);
    if (st != 0) {
      sv_respond_detail(sv, req, st, msg);
    } else {
      x->req = req;
      x->t0_us = sv_now_us();
      x->wall_ms = wall_ms;
      ludo__http_req_set_data(req, x);
      rc = sv_sess_call(x, kind, input, len, http_done);
      if (rc != 0) {
        x->req = NULL;
        ludo__http_req_set_data(req, NULL);
        refuse_start(sv, req, rc);
      }
    }
    return;
  }
  x = sv_sess_open(sv, kind_new, opened_then_call, &why);
  if (x == NULL) {
    char msg[200];
    sv_capacity_text(sv, msg, sizeof msg);
    if (why == LUDO_ECLOSED)
      refuse_start(sv, req, why);
    else
      sv_respond_detail(sv, req, why == LUDO_EBUSY ? 503 : 500,
                        why == LUDO_EBUSY ? msg : "out of memory");
    return;
  }
  x->req = req;
  x->call = kind;
  x->t0_us = sv_now_us();
  x->wall_ms = wall_ms; /* for the call once it opens */
  ludo__http_req_set_data(req, x);
  x->pending = ludo__malloc(&sv->core->heap, len + 1);
  if (x->pending == NULL) {
    x->req = NULL;
    ludo__http_req_set_data(req, NULL);
    sv_sess_close(x);
    sv_respond_detail(sv, req, 500, "out of memory");
    return;
  }
  memcpy(x->pending, input ? input : "", len);
  x->pending[len] = '\0';
  x->pending_len = len;
}

/* Runs a reset with the options text/len on the named session or a new
 * one, and frees text (json_dumps's, may be NULL). */
static void reset_text(ludo__serve_t *sv, ludo__http_req_t *req,
                       const char *id, char *text) {
  run_on_session(sv, req, id, LUDO__CALL_RESET, SV_SESS_HTTP, text,
                 text ? strlen(text) : 0, 0);
  free(text);
}

/* POST /reset: a body of the common shape goes to the session as sent
 * (sv_body_scan); any other through jansson, which answers its errors. */
static void route_reset(ludo__serve_t *sv, ludo__http_req_t *req) {
  size_t len;
  const char *raw = ludo__http_req_body(req, &len);
  json_t *body, *errs;
  char idbuf[64], bodyid[64];
  const char *id;
  sv_body_t b;
  if (sv_body_scan(&sv->core->heap, raw, len, 1, &b)) {
    id = named_session(req, NULL, idbuf, sizeof idbuf);
    run_on_session(sv, req, id, LUDO__CALL_RESET, SV_SESS_HTTP, raw, len, 0);
    return;
  }
  if ((body = body_object(sv, req, 1)) == NULL) return;
  if (body_session_id(sv, req, body, bodyid, sizeof bodyid, &id) != 0) {
    json_decref(body);
    return;
  }
  id = named_session(req, id, idbuf, sizeof idbuf);
  if ((errs = sv_reset_errors(body, "body")) != NULL) {
    respond_422(sv, req, errs);
    json_decref(body);
    return;
  }
  reset_text(sv, req, id, json_dumps(body, JSON_COMPACT));
  json_decref(body);
}

/* StepRequest's timeout_s (a number > 0, or null / absent: 0) as the
 * step's wall-clock limit in ms: rounded up, so that no positive timeout
 * becomes 0 ("none"); past 2^32 - 1 ms (49 days), that. */
static uint32_t timeout_ms(double t) {
  double ms;
  if (!(t > 0)) return 0;
  ms = ceil(t * 1000.0);
  return ms >= 4294967295.0 ? UINT32_MAX : (uint32_t)ms;
}

/* OpenEnv's request_id (StepRequest, ResetRequest): a string of at most
 * 255 characters, or null; its error or NULL. */
static json_t *request_id_error(json_t *body) {
  json_t *r = json_object_get(body, "request_id");
  if (r == NULL || json_is_null(r)) return NULL;
  if (!json_is_string(r))
    return field_error("string_type", "request_id", "Input should be a "
                       "valid string", r);
  if (ludo__utf8_chars(json_string_value(r), json_string_length(r)) > 255)
    return field_error("string_too_long", "request_id", "String should "
                       "have at most 255 characters", r);
  return NULL;
}

/* StepRequest's checks of the body (session_id taken out): the errors'
 * list of the first failure, or NULL. */
static json_t *step_errors(json_t *body) {
  json_t *action = json_object_get(body, "action");
  json_t *t = json_object_get(body, "timeout_s");
  if (action == NULL)
    return field_error("missing", "action", "Field required", body);
  if (!json_is_object(action))
    return field_error("dict_type", "action", "Input should be a valid "
                       "dictionary", action);
  if (t != NULL && !json_is_null(t) && !json_is_number(t))
    return field_error("float_type", "timeout_s", "Input should be a "
                       "valid number", t);
  if (t != NULL && json_is_number(t) && json_number_value(t) <= 0)
    return field_error("greater_than", "timeout_s", "Input should be "
                       "greater than 0", t);
  return request_id_error(body);
}

/* POST /step: a body of the common shape hands its action's bytes to the
 * session as sent (sv_body_scan), building no tree on the loop; any other
 * goes through jansson, which answers its errors. */
static void route_step(ludo__serve_t *sv, ludo__http_req_t *req) {
  size_t len;
  const char *raw = ludo__http_req_body(req, &len);
  json_t *body, *errs;
  char idbuf[64], bodyid[64], *text;
  const char *id;
  sv_body_t b;
  if (sv_body_scan(&sv->core->heap, raw, len, 0, &b)) {
    id = named_session(req, b.has_session_id ? b.session_id : NULL, idbuf,
                       sizeof idbuf);
    run_on_session(sv, req, id, LUDO__CALL_STEP, SV_SESS_EPHEMERAL,
                   raw + b.action_at, b.action_len, timeout_ms(b.timeout_s));
    return;
  }
  if ((body = body_object(sv, req, 0)) == NULL) return;
  if (body_session_id(sv, req, body, bodyid, sizeof bodyid, &id) != 0) {
    json_decref(body);
    return;
  }
  id = named_session(req, id, idbuf, sizeof idbuf);
  if ((errs = step_errors(body)) != NULL) {
    respond_422(sv, req, errs);
  } else {
    json_t *t = json_object_get(body, "timeout_s");
    text = json_dumps(json_object_get(body, "action"), JSON_COMPACT);
    run_on_session(sv, req, id, LUDO__CALL_STEP, SV_SESS_EPHEMERAL, text,
                   text ? strlen(text) : 0,
                   timeout_ms(json_is_number(t) ? json_number_value(t) : 0));
    free(text);
  }
  json_decref(body);
}

static void route_state(ludo__serve_t *sv, ludo__http_req_t *req) {
  char idbuf[64];
  const char *id = named_session(req, NULL, idbuf, sizeof idbuf);
  run_on_session(sv, req, id, LUDO__CALL_STATE, SV_SESS_EPHEMERAL, NULL, 0,
                 0);
}

static void route_mcp(ludo__serve_t *sv, ludo__http_req_t *req) {
  size_t len;
  const char *body = ludo__http_req_body(req, &len);
  const char *v = ludo__http_req_header(req, "MCP-Protocol-Version");
  if (v != NULL && !sv_mcp_version_known(v)) {
    /* MCP's transport: a version the server does not speak is 400 */
    char msg[200];
    snprintf(msg, sizeof msg, "Bad Request: unsupported MCP-Protocol-"
             "Version: %.64s", v);
    respond_value(sv, req, 400, json_pack("{s:s,s:n,s:{s:i,s:o}}",
                                          "jsonrpc", "2.0", "id", "error",
                                          "code", -32600, "message",
                                          sv_jstr(msg, (size_t)-1)),
                  NULL, 0);
    return;
  }
  sv_mcp_handle(sv, NULL, req, NULL, 0, body, len);
}

/* ---- the table -------------------------------------------------------- */

typedef struct {
  const char *method, *path;
  void (*fn)(ludo__serve_t *sv, ludo__http_req_t *req);
  int simulation; /* only in simulation mode */
} route_t;

static void route_health(ludo__serve_t *sv, ludo__http_req_t *req) {
  sv_respond_json(sv, req, 200, "{\"status\":\"healthy\"}", 20, NULL, 0);
}

static const route_t routes[] = {
    {"GET", "/health", route_health, 0},
    {"GET", "/metadata", route_metadata, 0},
    {"GET", "/schema", route_schema, 0},
    {"GET", "/openapi.json", route_openapi, 0},
    {"GET", "/metrics", route_metrics, 0},
    {"POST", "/mcp", route_mcp, 0},
    {"POST", "/reset", route_reset, 1},
    {"POST", "/step", route_step, 1},
    {"GET", "/state", route_state, 1},
};

void sv_route(ludo__serve_t *sv, ludo__http_req_t *req) {
  const char *method = ludo__http_req_method(req);
  const char *path = ludo__http_req_path(req);
  size_t i;
  const route_t *found = NULL;
  int head = strcmp(method, "HEAD") == 0;
  for (i = 0; i < sizeof routes / sizeof *routes; i++) {
    const route_t *r = &routes[i];
    if (strcmp(r->path, path) != 0) continue;
    if (r->simulation && sv->o.production) continue;
    found = r;
    if (strcmp(r->method, method) == 0 ||
        (head && strcmp(r->method, "GET") == 0)) {
      r->fn(sv, req);
      return;
    }
  }
  /* each path has one method (and HEAD with GET) */
  if (found)
    sv_respond_405(sv, req, strcmp(found->method, "GET") == 0 ? "GET, HEAD"
                                                              : found->method);
  else if (!sv_tasks_route(sv, req))
    sv_respond_json(sv, req, 404, "{\"detail\":\"Not Found\"}", 22, NULL, 0);
}
