/* tasks.c - OpenEnv's Task API (OPENENV.md 1.9, docs/serve-tasks.md):
 * GET /list_environments, GET /{env_name}/splits and POST
 * /{env_name}/tasks, /num_tasks, /task, /task_range, in both modes. A
 * request's body is checked here (pydantic's 422s), the environment's
 * name compared without regard to case (404), and the request runs as a
 * ludo_session_tasks call on a throwaway session, as OpenEnv builds a
 * fresh environment per request; its answer is wrapped in OpenEnv's shape
 * and its failures become OpenEnv's statuses: 501 for what the
 * environment does not offer, 400 for an index with no task. */
#include "serve/internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The body fields a route takes after "split". */
enum { BODY_NONE = 0, BODY_SPLIT, BODY_INDEX, BODY_RANGE };

typedef struct {
  const char *path;    /* the path's last segment */
  const char *method;  /* HTTP method */
  int body;            /* BODY_* */
  const char *call;    /* the method of the ludo_session_tasks request */
  const char *openenv; /* OpenEnv's name for it, as its 501 says */
  const char *key;     /* the answer's field; NULL: the result as is */
  const char *summary; /* for /openapi.json */
} task_route_t;

static const task_route_t task_routes[] = {
    {"splits", "GET", BODY_NONE, "splits", "list_splits", NULL,
     "The environment's task splits"},
    {"tasks", "POST", BODY_SPLIT, "list", "list_tasks", "tasks",
     "The tasks of a split"},
    {"num_tasks", "POST", BODY_SPLIT, "count", "num_tasks", "num_tasks",
     "The number of tasks in a split"},
    {"task", "POST", BODY_INDEX, "get", "get_task", "task",
     "The task at an index of a split"},
    {"task_range", "POST", BODY_RANGE, "range", "get_task_range", "tasks",
     "Tasks [start, stop) of a split"},
};

#define NROUTES (sizeof task_routes / sizeof *task_routes)

/* The environment's name, as /metadata gives it. */
static const char *env_name(ludo__serve_t *sv) {
  const char *name = json_string_value(json_object_get(sv->info, "name"));
  return name ? name : sv->env->name;
}

/* Answers the JSON of `v` (taken) with `status`. */
static void respond(ludo__serve_t *sv, ludo__http_req_t *req, int status,
                    json_t *v) {
  char *text = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
  if (text == NULL)
    sv_respond_detail(sv, req, 500, "out of memory");
  else
    sv_respond_json(sv, req, status, text, strlen(text), NULL, 0);
  free(text);
  json_decref(v);
}

/* ---- the path --------------------------------------------------------- */

/* Python's repr() of a str, as OpenEnv's 404 shows the name: single
 * quotes, or double quotes when the text holds a single quote and no
 * double one; backslashes and the quote escaped. */
static void py_repr(const char *s, char *out, size_t size) {
  char q = strchr(s, '\'') && !strchr(s, '"') ? '"' : '\'';
  size_t k = 0;
  if (size < 3) return;
  out[k++] = q;
  for (; *s && k + 3 < size; s++) {
    if (*s == q || *s == '\\') out[k++] = '\\';
    out[k++] = *s;
  }
  out[k++] = q;
  out[k] = '\0';
}

/* The route of `path` ("/{env_name}/<route>") with the name's segment in
 * name/nlen, or NULL when the path is not a Task API route. */
static const task_route_t *match(const char *path, const char **name,
                                 size_t *nlen) {
  const char *slash;
  size_t i;
  if (path[0] != '/') return NULL;
  slash = strchr(path + 1, '/');
  if (slash == NULL || slash == path + 1) return NULL;
  for (i = 0; i < NROUTES; i++) {
    if (strcmp(slash + 1, task_routes[i].path) == 0) {
      *name = path + 1;
      *nlen = (size_t)(slash - path - 1);
      return &task_routes[i];
    }
  }
  return NULL;
}

/* ---- the body --------------------------------------------------------- */

/* One pydantic-style error: loc ["body", field] (["body"] for NULL). */
static json_t *body_error(const char *type, const char *field,
                          const char *msg, json_t *input) {
  json_t *loc = field ? json_pack("[s,s]", "body", field)
                      : json_pack("[s]", "body");
  return json_pack("{s:s,s:o,s:s,s:O}", "type", type, "loc", loc, "msg",
                   msg, "input", input ? input : json_null());
}

/* pydantic's int in lax mode: an integer, a float without a fraction, or
 * a string holding an integer. Sets *out, or appends the error. */
static int int_field(json_t *v, const char *field, json_int_t *out,
                     json_t *errors) {
  if (json_is_integer(v)) {
    *out = json_integer_value(v);
    return 0;
  }
  if (json_is_real(v)) {
    double d = json_real_value(v);
    if (d == floor(d) && d >= -9.2e18 && d <= 9.2e18) {
      *out = (json_int_t)d;
      return 0;
    }
    if (d == floor(d)) { /* whole, but past what an integer holds */
      json_array_append_new(errors, body_error("int_parsing_size", field,
                                               "Unable to parse input as an "
                                               "integer, exceeded maximum "
                                               "size", v));
      return -1;
    }
    json_array_append_new(errors, body_error("int_from_float", field,
                                             "Input should be a valid "
                                             "integer, got a number with a "
                                             "fractional part", v));
    return -1;
  }
  if (json_is_string(v)) {
    const char *s = json_string_value(v);
    char *end;
    long long n;
    errno = 0;
    n = strtoll(s, &end, 10);
    if (*s != '\0' && !isspace((unsigned char)*s) && *end == '\0' &&
        errno == 0) {
      *out = (json_int_t)n;
      return 0;
    }
    json_array_append_new(errors, body_error("int_parsing", field,
                                             "Input should be a valid "
                                             "integer, unable to parse "
                                             "string as an integer", v));
    return -1;
  }
  json_array_append_new(errors, body_error("int_type", field, "Input "
                                           "should be a valid integer", v));
  return -1;
}

/* Checks the body of a POST route as OpenEnv's request models do (every
 * field checked, unknown ones forbidden) and returns the
 * ludo_session_tasks request; NULL after answering 422. */
static json_t *task_request(ludo__serve_t *sv, ludo__http_req_t *req,
                            const task_route_t *r) {
  size_t len;
  const char *text = ludo__http_req_body(req, &len);
  json_error_t jerr;
  json_t *body, *errors, *out, *v;
  const char *k;
  json_int_t n;
  if (len == 0) {
    respond(sv, req, 422, json_pack("{s:[o]}", "detail",
                                    body_error("missing", NULL, "Field "
                                               "required", NULL)));
    return NULL;
  }
  body = sv_json_load(sv, text, len, &jerr);
  if (body == NULL &&
      (body = sv_json_limit_error(sv, text, len, "body")) != NULL) {
    respond(sv, req, 422, json_pack("{s:[o]}", "detail", body));
    return NULL; /* JSON, with a number out of range */
  }
  if (body == NULL) {
    char msg[300];
    snprintf(msg, sizeof msg, "JSON decode error: %s", jerr.text);
    respond(sv, req, 422,
            json_pack("{s:[{s:s,s:[s,i],s:s,s:{}}]}", "detail", "type",
                      "json_invalid", "loc", "body", jerr.position, "msg",
                      msg, "input"));
    return NULL;
  }
  errors = json_array();
  out = json_pack("{s:s}", "method", r->call);
  if (errors == NULL || out == NULL) goto nomem;
  if (!json_is_object(body)) {
    json_array_append_new(errors, body_error("model_attributes_type", NULL,
                                             "Input should be a valid "
                                             "dictionary or object to "
                                             "extract fields from", body));
    goto invalid;
  }
  v = json_object_get(body, "split");
  if (v == NULL)
    json_array_append_new(errors, body_error("missing", "split", "Field "
                                             "required", body));
  else if (!json_is_string(v))
    json_array_append_new(errors, body_error("string_type", "split", "Input "
                                             "should be a valid string", v));
  else
    json_object_set(out, "split", v);
  if (r->body == BODY_INDEX) {
    v = json_object_get(body, "index");
    if (v == NULL)
      json_array_append_new(errors, body_error("missing", "index", "Field "
                                               "required", body));
    else if (int_field(v, "index", &n, errors) == 0)
      json_object_set_new(out, "index", json_integer(n));
  } else if (r->body == BODY_RANGE) {
    static const char *const bounds[] = {"start", "stop"};
    size_t i;
    for (i = 0; i < 2; i++) {
      v = json_object_get(body, bounds[i]);
      if (v != NULL && !json_is_null(v) &&
          int_field(v, bounds[i], &n, errors) == 0)
        json_object_set_new(out, bounds[i], json_integer(n));
    }
  }
  json_object_foreach(body, k, v) {
    if (strcmp(k, "split") == 0 ||
        (r->body == BODY_INDEX && strcmp(k, "index") == 0) ||
        (r->body == BODY_RANGE &&
         (strcmp(k, "start") == 0 || strcmp(k, "stop") == 0)))
      continue;
    json_array_append_new(errors, body_error("extra_forbidden", k, "Extra "
                                             "inputs are not permitted", v));
  }
  if (json_array_size(errors) > 0) goto invalid;
  json_decref(errors);
  json_decref(body);
  return out;
invalid:
  respond(sv, req, 422, json_pack("{s:o}", "detail", errors));
  json_decref(out);
  json_decref(body);
  return NULL;
nomem:
  sv_respond_detail(sv, req, 500, "out of memory");
  json_decref(errors);
  json_decref(out);
  json_decref(body);
  return NULL;
}

/* ---- the call --------------------------------------------------------- */

/* The answer of a finished call: its result in OpenEnv's shape, or the
 * status its failure stands for. The throwaway session closes. */
static void task_done(sv_sess_t *x, int status, const char *data,
                      size_t len) {
  ludo__serve_t *sv = x->sv;
  ludo__http_req_t *req = x->req;
  const task_route_t *r = &task_routes[x->route];
  x->req = NULL;
  sv_sess_release_slot(x); /* before the answer: the slot is free then */
  if (req != NULL) {
    ludo__http_req_set_data(req, NULL);
    if (status == 0) {
      ludo__buf_t b;
      char *name = json_dumps(json_object_get(sv->info, "name"),
                              JSON_ENCODE_ANY);
      int bad;
      ludo__buf_init(&b, ludo__alloc_fn, &sv->core->heap);
      bad = r->key && ludo__buf_printf(&b, "{\"%s\":", r->key) != 0;
      bad = bad || ludo__buf_add(&b, data, len) != 0;
      if (r->key && strcmp(r->call, "list") == 0)
        bad = bad || name == NULL ||
              ludo__buf_printf(&b, ",\"env_name\":%s", name) != 0;
      if (r->key) bad = bad || ludo__buf_addc(&b, '}') != 0;
      if (bad)
        sv_respond_detail(sv, req, 500, "out of memory");
      else
        sv_respond_json(sv, req, 200, b.p, b.len, NULL, 0);
      ludo__buf_free(&b);
      free(name);
    } else if (status == LUDO_ENOTSUP) {
      char msg[96];
      snprintf(msg, sizeof msg, "%s is not supported for this environment",
               r->openenv);
      sv_respond_detail(sv, req, 501, msg);
    } else if (status == LUDO_ERANGE) {
      sv_respond_detail(sv, req, 400, "Invalid task index");
    } else if (status == LUDO_ESCHEMA) { /* a split it does not list */
      json_t *errors = sv_validation_errors(data, len, "body");
      json_t *call = json_loadb(x->pending, x->pending_len, 0, NULL);
      json_t *split = json_object_get(call, "split");
      if (split != NULL)
        json_object_set(json_array_get(errors, 0), "input", split);
      json_decref(call);
      respond(sv, req, 422, json_pack("{s:o}", "detail", errors));
    } else if (status == LUDO_ETOOBIG) {
      sv_respond_detail(sv, req, 413, data);
    } else {
      char msg[1024];
      snprintf(msg, sizeof msg, "%.*s", (int)(len < 1000 ? len : 1000), data);
      sv_respond_detail(sv, req, 500, msg);
    }
  }
  sv_sess_close(x);
}

/* The throwaway session is open: runs the call. */
static void task_opened(sv_sess_t *x, int status, const char *data,
                        size_t len) {
  int rc;
  (void)data;
  (void)len;
  if (status != 0) {
    if (x->req != NULL) {
      ludo__http_req_set_data(x->req, NULL);
      sv_respond_detail(x->sv, x->req, 500, "Environment factory failed to "
                        "create instance.");
      x->req = NULL;
    }
    return;
  }
  rc = sv_sess_call(x, LUDO__CALL_TASKS, x->pending, x->pending_len,
                    task_done);
  if (rc != 0) task_done(x, rc, "the call could not start", 24);
}

/* Opens a throwaway session that runs `call` (the request's JSON) and
 * answers `req`. */
static void run_task(ludo__serve_t *sv, ludo__http_req_t *req,
                     const task_route_t *r, json_t *call) {
  char *text = json_dumps(call, JSON_COMPACT);
  size_t len = text ? strlen(text) : 0;
  sv_sess_t *x;
  int why;
  if (text == NULL) {
    sv_respond_detail(sv, req, 500, "out of memory");
    return;
  }
  x = sv_sess_open(sv, SV_SESS_EPHEMERAL, task_opened, &why);
  if (x == NULL) {
    char msg[200];
    sv_capacity_text(sv, msg, sizeof msg);
    sv_respond_detail(sv, req, why == LUDO_EBUSY ? 503 : 500,
                      why == LUDO_EBUSY ? msg : "the server is closing");
    free(text);
    return;
  }
  x->pending = ludo__malloc(&sv->core->heap, len + 1);
  if (x->pending == NULL) {
    sv_sess_close(x);
    sv_respond_detail(sv, req, 500, "out of memory");
    free(text);
    return;
  }
  memcpy(x->pending, text, len + 1);
  x->pending_len = len;
  x->route = (int)(r - task_routes);
  x->call = LUDO__CALL_TASKS;
  x->req = req;
  ludo__http_req_set_data(req, x);
  free(text);
}

/* ---- routing ---------------------------------------------------------- */

int sv_tasks_route(ludo__serve_t *sv, ludo__http_req_t *req) {
  const char *method = ludo__http_req_method(req);
  const char *path = ludo__http_req_path(req);
  const task_route_t *r;
  const char *seg;
  size_t seglen;
  char name[256];
  json_t *call;
  int get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
  int fits;
  if (strcmp(path, "/list_environments") == 0) {
    if (!get)
      sv_respond_405(sv, req, "GET, HEAD");
    else
      respond(sv, req, 200, json_pack("[s]", env_name(sv)));
    return 1;
  }
  r = match(path, &seg, &seglen);
  if (r == NULL) return 0;
  if (strcmp(r->method, "GET") == 0 ? !get : strcmp(method, r->method)) {
    sv_respond_405(sv, req,
                   strcmp(r->method, "GET") == 0 ? "GET, HEAD" : r->method);
    return 1;
  }
  if (r->body == BODY_NONE) {
    call = json_pack("{s:s}", "method", r->call);
    if (call == NULL) {
      sv_respond_detail(sv, req, 500, "out of memory");
      return 1;
    }
  } else if ((call = task_request(sv, req, r)) == NULL) {
    return 1; /* answered */
  }
  fits = sv_unescape(seg, seglen, 0, name, sizeof name) == 0;
  if (!fits || strcasecmp(name, env_name(sv)) != 0) {
    char shown[300], msg[340];
    if (!fits) /* shown as sent */
      snprintf(name, sizeof name, "%.*s", (int)(seglen < 200 ? seglen : 200),
               seg);
    py_repr(name, shown, sizeof shown);
    snprintf(msg, sizeof msg, "unknown environment %s", shown);
    sv_respond_detail(sv, req, 404, msg);
    json_decref(call);
    return 1;
  }
  run_task(sv, req, r, call);
  json_decref(call);
  return 1;
}

/* ---- /openapi.json ---------------------------------------------------- */

/* The JSON Schema of a route's request body. New reference. */
static json_t *body_schema(const task_route_t *r) {
  json_t *props = json_pack("{s:{s:s,s:s}}", "split", "type", "string",
                            "title", "Split");
  json_t *required = json_pack("[s]", "split");
  if (r->body == BODY_INDEX) {
    json_object_set_new(props, "index", json_pack("{s:s,s:s}", "type",
                                                  "integer", "title",
                                                  "Index"));
    json_array_append_new(required, json_string("index"));
  } else if (r->body == BODY_RANGE) {
    json_object_set_new(props, "start",
                        json_pack("{s:[{s:s},{s:s}],s:n,s:s}", "anyOf",
                                  "type", "integer", "type", "null",
                                  "default", "title", "Start"));
    json_object_set_new(props, "stop",
                        json_pack("{s:[{s:s},{s:s}],s:n,s:s}", "anyOf",
                                  "type", "integer", "type", "null",
                                  "default", "title", "Stop"));
  }
  return json_pack("{s:s,s:o,s:o,s:b}", "type", "object", "properties",
                   props, "required", required, "additionalProperties", 0);
}

void sv_tasks_openapi(ludo__serve_t *sv, json_t *paths) {
  size_t i;
  (void)sv;
  json_object_set_new(
      paths, "/list_environments",
      json_pack("{s:{s:s,s:[s],s:{s:{s:s}}}}", "get", "summary",
                "The environments served: [name]", "tags", "Task API",
                "responses", "200", "description", "Successful Response"));
  for (i = 0; i < NROUTES; i++) {
    const task_route_t *r = &task_routes[i];
    char path[64];
    json_t *op = json_pack(
        "{s:s,s:[s],s:[{s:s,s:s,s:b,s:{s:s}}],s:{s:{s:s},s:{s:s},s:{s:s},"
        "s:{s:s},s:{s:s}}}",
        "summary", r->summary, "tags", "Task API", "parameters", "name",
        "env_name", "in", "path", "required", 1, "schema", "type", "string",
        "responses", "200", "description", "Successful Response", "400",
        "description", "Invalid task index", "404", "description",
        "unknown environment", "422", "description", "Validation Error",
        "501", "description", "Not supported for this environment");
    if (r->body != BODY_NONE)
      json_object_set_new(
          op, "requestBody",
          json_pack("{s:b,s:{s:{s:o}}}", "required", 1, "content",
                    "application/json", "schema", body_schema(r)));
    snprintf(path, sizeof path, "/{env_name}/%s", r->path);
    json_object_set_new(paths, path,
                        json_pack("{s:o}", r->body == BODY_NONE ? "get"
                                                                : "post",
                                  op));
  }
}
