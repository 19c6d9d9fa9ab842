/* clientproto.c - the client's side of OpenEnv's /ws protocol (see
 * clientproto.h). Results are found with base/jsonraw (byte for byte);
 * the details of errors, small and rare, are read with jansson. */
#include "net/clientproto.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/errors.h"
#include "base/jsonraw.h"

/* Nesting allowed in frames: deeper than any value a session makes. */
#define MAXDEPTH 256

const char *ludo__clientproto_name(int kind) {
  switch (kind) {
    case LUDO__CP_RESET: return "reset";
    case LUDO__CP_STEP: return "step";
    case LUDO__CP_STATE: return "state";
    case LUDO__CP_TOOLS: return "list_tools";
    case LUDO__CP_CALL_TOOL: return "call_tool";
    case LUDO__CP_CLOSE: return "close";
    default: return "?";
  }
}

static int set_msg(ludo__buf_t *msg, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int set_msg(ludo__buf_t *msg, const char *fmt, ...) {
  va_list ap;
  ludo__buf_reset(msg);
  va_start(ap, fmt);
  ludo__buf_vprintf(msg, fmt, ap);
  va_end(ap);
  return 0;
}

/* Checks that an input is a JSON object; says what is wrong otherwise. */
static int check_object(const char *what, const char *json, size_t len,
                        ludo__jsonraw_t *m, size_t n, ludo__buf_t *scratch,
                        ludo__buf_t *msg) {
  ludo__jsonparse_err_t err;
  int rc = ludo__jsonraw_members(json, len, MAXDEPTH, m, n, scratch, &err);
  if (rc == LUDO_EPARSE)
    set_msg(msg, "EPARSE: the %s is not JSON: %s at line %zu column %zu",
            what, err.msg, err.line, err.column);
  else if (rc == LUDO_EINVAL)
    set_msg(msg, "EINVAL: the %s must be a JSON object", what);
  else if (rc == LUDO_ENOMEM)
    set_msg(msg, "ENOMEM: no memory to read the %s", what);
  return rc;
}

int ludo__clientproto_request(ludo__buf_t *b, int kind, const char *json,
                              size_t len, long long id,
                              ludo__buf_t *scratch, ludo__buf_t *msg) {
  ludo__jsonraw_t name = {"name", NULL, 0};
  int rc = 0;
  size_t start = b->len;
  switch (kind) {
    case LUDO__CP_RESET:
      if (json != NULL && len > 0 &&
          (rc = check_object("reset options", json, len, NULL, 0, scratch,
                             msg)) != 0)
        return rc;
      rc = ludo__buf_adds(b, "{\"type\":\"reset\",\"data\":");
      if (rc == 0)
        rc = json != NULL && len > 0 ? ludo__buf_add(b, json, len)
                                     : ludo__buf_adds(b, "{}");
      if (rc == 0) rc = ludo__buf_addc(b, '}');
      break;
    case LUDO__CP_STEP:
      if (json == NULL || len == 0) {
        set_msg(msg, "EINVAL: a step needs an action (a JSON object)");
        return LUDO_EINVAL;
      }
      if ((rc = check_object("action", json, len, NULL, 0, scratch, msg)))
        return rc;
      rc = ludo__buf_adds(b, "{\"type\":\"step\",\"data\":");
      if (rc == 0) rc = ludo__buf_add(b, json, len);
      if (rc == 0) rc = ludo__buf_addc(b, '}');
      break;
    case LUDO__CP_STATE:
      rc = ludo__buf_adds(b, "{\"type\":\"state\"}");
      break;
    case LUDO__CP_CLOSE:
      rc = ludo__buf_adds(b, "{\"type\":\"close\"}");
      break;
    case LUDO__CP_TOOLS:
      rc = ludo__buf_printf(b,
                            "{\"type\":\"mcp\",\"data\":{\"jsonrpc\":\"2.0\","
                            "\"id\":%lld,\"method\":\"tools/list\","
                            "\"params\":{}}}",
                            id);
      break;
    case LUDO__CP_CALL_TOOL:
      if (json == NULL || len == 0) {
        set_msg(msg, "EINVAL: a tool call needs {\"name\": ..., "
                     "\"arguments\": {...}}");
        return LUDO_EINVAL;
      }
      if ((rc = check_object("tool call", json, len, &name, 1, scratch,
                             msg)))
        return rc;
      if (name.text == NULL || name.text[0] != '"') {
        set_msg(msg, "EINVAL: a tool call needs a \"name\" (a string)");
        return LUDO_EINVAL;
      }
      rc = ludo__buf_printf(b,
                            "{\"type\":\"mcp\",\"data\":{\"jsonrpc\":\"2.0\","
                            "\"id\":%lld,\"method\":\"tools/call\","
                            "\"params\":",
                            id);
      if (rc == 0) rc = ludo__buf_add(b, json, len);
      if (rc == 0) rc = ludo__buf_adds(b, "}}");
      break;
    default:
      set_msg(msg, "EINVAL: unknown request");
      return LUDO_EINVAL;
  }
  if (rc != 0) {
    b->len = start;
    set_msg(msg, "ENOMEM: no memory for the request");
    return LUDO_ENOMEM;
  }
  return 0;
}

/* ---- replies ----------------------------------------------------------- */

/* The ludo code an OpenEnv error code maps to, and whether the server
 * closes the connection after it. */
static int ws_code(const char *code, const char *message, int *fatal) {
  static const struct {
    const char *name;
    int code, fatal;
  } map[] = {{"INVALID_JSON", LUDO_EPARSE, 0},
             {"UNKNOWN_TYPE", LUDO_EPROTO, 0},
             {"VALIDATION_ERROR", LUDO_ESCHEMA, 0},
             {"EXECUTION_ERROR", LUDO_ESCRIPT, 0},
             {"CAPACITY_REACHED", LUDO_ECAPACITY, 1},
             {"FACTORY_ERROR", LUDO_ELOAD, 1},
             {"SESSION_ERROR", LUDO_EDISCONNECTED, 1}};
  size_t i;
  for (i = 0; i < sizeof map / sizeof map[0]; i++) {
    if (strcmp(map[i].name, code) != 0) continue;
    *fatal = map[i].fatal;
    if (map[i].code == LUDO_ESCRIPT) {
      /* A ludo server says which limit or error stopped the call. */
      size_t n = strspn(message, "ABCDEFGHIJKLMNOPQRSTUVWXYZ");
      int c = n > 1 && message[0] == 'E' && message[n] == ':'
                  ? ludo__err_code(message, n)
                  : 0;
      if (c != 0) return c;
    }
    return map[i].code;
  }
  *fatal = 0;
  return LUDO_EPROTO;
}

/* Writes "NAME: message" unless the message starts with "NAME:" already. */
static void put_named(ludo__buf_t *msg, int code, const char *text) {
  const char *name = ludo__err_name(code);
  size_t n = strlen(name);
  ludo__buf_reset(msg);
  if (!(strncmp(text, name, n) == 0 && text[n] == ':'))
    ludo__buf_printf(msg, "%s: ", name);
  ludo__buf_adds(msg, text);
}

/* The " (loc: msg; ...)" of a validation error's `errors`, at most 3. */
static void put_validation(ludo__buf_t *msg, json_t *errors) {
  size_t i, j;
  json_t *e;
  if (!json_is_array(errors) || json_array_size(errors) == 0) return;
  json_array_foreach(errors, i, e) {
    json_t *loc = json_object_get(e, "loc"), *part;
    const char *m = json_string_value(json_object_get(e, "msg"));
    if (i == 3) {
      ludo__buf_printf(msg, "; ...");
      break;
    }
    ludo__buf_adds(msg, i == 0 ? ": " : "; ");
    json_array_foreach(loc, j, part) {
      if (j > 0) ludo__buf_addc(msg, '.');
      if (json_is_string(part))
        ludo__buf_adds(msg, json_string_value(part));
      else if (json_is_integer(part))
        ludo__buf_printf(msg, "%lld", (long long)json_integer_value(part));
    }
    ludo__buf_printf(msg, "%s%s", json_array_size(loc) ? ": " : "",
                     m ? m : "invalid");
  }
}

/* An error frame's data: {"message","code",...}. */
static int error_frame(const ludo__jsonraw_t *data, ludo__buf_t *msg,
                       int *fatal) {
  json_t *v = data->text ? json_loadb(data->text, data->len, 0, NULL) : NULL;
  const char *text = json_string_value(json_object_get(v, "message"));
  const char *code = json_string_value(json_object_get(v, "code"));
  int rc;
  if (!json_is_object(v) || code == NULL) {
    json_decref(v);
    *fatal = 1;
    set_msg(msg, "EPROTO: the server sent an error frame without a code");
    return LUDO_EPROTO;
  }
  if (text == NULL) text = "(no message)";
  rc = ws_code(code, text, fatal);
  put_named(msg, rc, text);
  if (rc == LUDO_ESCHEMA) put_validation(msg, json_object_get(v, "errors"));
  ludo__buf_printf(msg, " (%s)", code);
  json_decref(v);
  return rc;
}

/* A JSON-RPC error object: {"code","message","data"}. */
static int rpc_error(json_t *err, ludo__buf_t *msg, int *fatal) {
  json_int_t code = json_integer_value(json_object_get(err, "code"));
  const char *text = json_string_value(json_object_get(err, "message"));
  json_t *data = json_object_get(err, "data");
  int rc;
  *fatal = 0;
  if (text == NULL) text = "(no message)";
  switch (code) {
    case -32700: rc = LUDO_EPARSE; break;
    case -32600:
    case -32601: rc = LUDO_EPROTO; break;
    case -32602:
      rc = strncmp(text, "Invalid params", 14) == 0 ? LUDO_ESCHEMA
           : strstr(text, "not found") || strstr(text, "nknown tool")
               ? LUDO_ENOENT
               : LUDO_EINVAL;
      break;
    case -32603:
      rc = strstr(text, "does not support MCP") ? LUDO_ENOENT : LUDO_ESCRIPT;
      break;
    case -32000:
      rc = json_object_get(data, "max_sessions") ? LUDO_ECAPACITY
                                                  : LUDO_ELOAD;
      *fatal = rc == LUDO_ECAPACITY;
      break;
    default: rc = LUDO_EPROTO; break;
  }
  put_named(msg, rc, text);
  ludo__buf_printf(msg, " (JSON-RPC %lld)", (long long)code);
  return rc;
}

/* The data of an mcp frame: a JSON-RPC response to request `id`. */
static int mcp_reply(long long id, const ludo__jsonraw_t *data,
                     ludo__buf_t *scratch, const char **res, size_t *rlen,
                     ludo__buf_t *msg, int *fatal) {
  ludo__jsonraw_t m[3] = {{"id", NULL, 0}, {"result", NULL, 0},
                          {"error", NULL, 0}};
  ludo__jsonparse_err_t err;
  char want[32];
  int rc = data->text ? ludo__jsonraw_members(data->text, data->len,
                                              MAXDEPTH, m, 3, scratch, &err)
                      : LUDO_EINVAL;
  if (rc == LUDO_ENOMEM) return rc;
  snprintf(want, sizeof want, "%lld", id);
  if (rc == 0 && m[2].text && !ludo__jsonraw_is_null(&m[2])) {
    json_t *e = json_loadb(m[2].text, m[2].len, 0, NULL);
    if (json_is_object(e)) {
      rc = rpc_error(e, msg, fatal);
      json_decref(e);
      return rc;
    }
    json_decref(e);
  } else if (rc == 0 && m[1].text && m[0].text &&
             m[0].len == strlen(want) && memcmp(m[0].text, want, m[0].len) == 0) {
    *res = m[1].text;
    *rlen = m[1].len;
    return 0;
  }
  *fatal = 1;
  set_msg(msg, "EPROTO: the server's mcp reply is not the JSON-RPC response "
               "to request %lld", id);
  return LUDO_EPROTO;
}

/* Is `p` (in [lo, p]) preceded by `"metadata":`, allowing whitespace
 * around the colon? Returns where the key begins, or NULL. */
static const char *key_before(const char *lo, const char *p) {
  static const char key[] = "\"metadata\"";
  const size_t klen = sizeof key - 1;
  while (p > lo && strchr(" \t\r\n", p[-1])) p--;
  if (p == lo || p[-1] != ':') return NULL;
  p--;
  while (p > lo && strchr(" \t\r\n", p[-1])) p--;
  if ((size_t)(p - lo) < klen || memcmp(p - klen, key, klen) != 0)
    return NULL;
  return p - klen;
}

/* Is the value text `{}` (with any whitespace inside)? */
static int empty_object(const char *p, size_t n) {
  size_t i;
  if (n < 2 || p[0] != '{' || p[n - 1] != '}') return 0;
  for (i = 1; i + 1 < n; i++)
    if (!strchr(" \t\r\n", p[i])) return 0;
  return 1;
}

/* OpenEnv's wire form (OPENENV.md 1.3; ludo serve writes it) carries the
 * result's metadata twice: at the top level and inside the observation.
 * A local session's observation never holds the envelope's metadata, so
 * the copy inside is taken out when it is the same text as the top-level
 * one (or `{}` when there is none at the top, as after a reset), and a
 * policy sees the same observation whether the environment is
 * local or remote. Any other observation is passed on byte for byte.
 * `*res`/`*rlen` is the result; the new text is made in `scratch`. */
static int unnest_metadata(const char **res, size_t *rlen,
                           ludo__buf_t *scratch, ludo__buf_t *msg) {
  ludo__jsonraw_t top[2] = {{"observation", NULL, 0}, {"metadata", NULL, 0}};
  ludo__jsonraw_t in[1] = {{"metadata", NULL, 0}};
  ludo__jsonparse_err_t err;
  const char *obs, *from, *to, *k;
  size_t olen;
  if (ludo__jsonraw_members(*res, *rlen, MAXDEPTH, top, 2, scratch, &err) ||
      top[0].text == NULL || top[0].text[0] != '{')
    return 0;
  obs = top[0].text;
  olen = top[0].len;
  if (ludo__jsonraw_members(obs, olen, MAXDEPTH, in, 1, scratch, &err) ||
      in[0].text == NULL)
    return 0;
  if (top[1].text != NULL ? in[0].len != top[1].len ||
                                memcmp(in[0].text, top[1].text, in[0].len)
                          : !empty_object(in[0].text, in[0].len))
    return 0; /* without metadata at the top, only an empty one goes */
  k = key_before(obs + 1, in[0].text);
  if (k == NULL) return 0; /* an escaped key: left as it is */
  /* Take out `"metadata":V` with the comma before it, or after it when
   * it is the first member. */
  from = k;
  to = in[0].text + in[0].len;
  while (from > obs + 1 && strchr(" \t\r\n", from[-1])) from--;
  if (from > obs + 1 && from[-1] == ',') {
    from--;
  } else {
    while (*to == ' ' || *to == '\t' || *to == '\r' || *to == '\n') to++;
    if (*to == ',') to++;
  }
  scratch->len = 0;
  if (ludo__buf_add(scratch, *res, (size_t)(from - *res)) ||
      ludo__buf_add(scratch, to, *rlen - (size_t)(to - *res))) {
    set_msg(msg, "ENOMEM: no memory to read the reply");
    return LUDO_ENOMEM;
  }
  *res = scratch->p;
  *rlen = scratch->len;
  return 0;
}

int ludo__clientproto_reply(int kind, long long id, const char *frame,
                            size_t len, ludo__buf_t *scratch,
                            const char **res, size_t *rlen, ludo__buf_t *msg,
                            int *fatal) {
  ludo__jsonraw_t m[2] = {{"type", NULL, 0}, {"data", NULL, 0}};
  ludo__jsonparse_err_t err;
  const char *want = kind == LUDO__CP_STATE ? "\"state\""
                     : kind == LUDO__CP_TOOLS || kind == LUDO__CP_CALL_TOOL
                         ? "\"mcp\""
                         : "\"observation\"";
  int rc = ludo__jsonraw_members(frame, len, MAXDEPTH, m, 2, scratch, &err);
  *fatal = 0;
  *res = NULL;
  *rlen = 0;
  if (rc == LUDO_ENOMEM) {
    set_msg(msg, "ENOMEM: no memory to read the reply");
    return rc;
  }
  if (rc != 0) {
    *fatal = 1;
    if (rc == LUDO_EPARSE)
      set_msg(msg, "EPROTO: the server's reply to %s is not JSON: %s at "
              "byte %zu", ludo__clientproto_name(kind), err.msg, err.offset);
    else
      set_msg(msg, "EPROTO: the server's reply to %s is not a JSON object",
              ludo__clientproto_name(kind));
    return LUDO_EPROTO;
  }
  if (m[0].text && m[0].len == 7 && memcmp(m[0].text, "\"error\"", 7) == 0)
    return error_frame(&m[1], msg, fatal);
  if (m[0].text == NULL || m[0].len != strlen(want) ||
      memcmp(m[0].text, want, m[0].len) != 0) {
    *fatal = 1;
    set_msg(msg, "EPROTO: the server answered %s with a frame of type "
            "%.*s (expected %s)", ludo__clientproto_name(kind),
            m[0].text ? (int)(m[0].len < 40 ? m[0].len : 40) : 4,
            m[0].text ? m[0].text : "none", want);
    return LUDO_EPROTO;
  }
  if (kind == LUDO__CP_TOOLS || kind == LUDO__CP_CALL_TOOL)
    return mcp_reply(id, &m[1], scratch, res, rlen, msg, fatal);
  if (m[1].text == NULL) {
    *fatal = 1;
    set_msg(msg, "EPROTO: the server's reply to %s has no data",
            ludo__clientproto_name(kind));
    return LUDO_EPROTO;
  }
  *res = m[1].text;
  *rlen = m[1].len;
  if (kind == LUDO__CP_RESET || kind == LUDO__CP_STEP)
    return unnest_metadata(res, rlen, scratch, msg);
  return 0;
}
