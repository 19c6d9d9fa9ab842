/* llmwire.c - request bodies and replies of the two LLM APIs (llmwire.h),
 * with jansson. */
#include "net/llmwire.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- requests ----------------------------------------------------------- */

static int set_str(json_t *o, const char *k, const char *s, size_t len) {
  json_t *v = json_stringn(s, len);
  return v == NULL ? -1 : json_object_set_new(o, k, v);
}

static json_t *message(const char *role, const char *s, size_t len) {
  json_t *m = json_object();
  if (m == NULL || set_str(m, "role", role, strlen(role)) != 0 ||
      set_str(m, "content", s, len) != 0) {
    json_decref(m);
    return NULL;
  }
  return m;
}

static json_t *stop_list(const ludo__llm_params_t *p) {
  json_t *a = json_array();
  size_t i;
  for (i = 0; a != NULL && i < p->nstop; i++)
    if (json_array_append_new(a, json_string(p->stop[i])) != 0) {
      json_decref(a);
      return NULL;
    }
  return a;
}

/* Appends the system messages' text to *sys (Anthropic's top-level
 * "system"), joined by blank lines. */
static int add_system(json_t **sys, const ludo__llm_msg_t *m) {
  json_t *s;
  if (*sys == NULL) {
    *sys = json_stringn(m->content, m->content_len);
    return *sys == NULL ? -1 : 0;
  }
  {
    size_t a = json_string_length(*sys), n = a + 2 + m->content_len;
    char *buf = malloc(n);
    if (buf == NULL) return -1;
    memcpy(buf, json_string_value(*sys), a);
    memcpy(buf + a, "\n\n", 2);
    memcpy(buf + a + 2, m->content, m->content_len);
    s = json_stringn(buf, n);
    free(buf);
  }
  if (s == NULL) return -1;
  json_decref(*sys);
  *sys = s;
  return 0;
}

static int add_messages(json_t *body, int api, const ludo__llm_msg_t *msgs,
                        size_t n) {
  json_t *a = json_array(), *sys = NULL;
  size_t i;
  if (a == NULL || json_object_set_new(body, "messages", a) != 0) return -1;
  for (i = 0; i < n; i++) {
    if (api == LUDO__LLM_ANTHROPIC && strcmp(msgs[i].role, "system") == 0) {
      if (add_system(&sys, &msgs[i]) != 0) return -1;
      continue;
    }
    if (json_array_append_new(a, message(msgs[i].role, msgs[i].content,
                                         msgs[i].content_len)) != 0)
      return -1;
  }
  return sys == NULL ? 0 : json_object_set_new(body, "system", sys);
}

static int add_params(json_t *body, int api, const ludo__llm_params_t *p) {
  long max = p->max_tokens;
  if (max == 0 && api == LUDO__LLM_ANTHROPIC)
    max = LUDO__LLM_ANTHROPIC_MAX_TOKENS;
  if (p->has_temperature &&
      json_object_set_new(body, "temperature", json_real(p->temperature)))
    return -1;
  if (max > 0 && json_object_set_new(body, "max_tokens", json_integer(max)))
    return -1;
  if (p->nstop > 0 &&
      json_object_set_new(body, api == LUDO__LLM_ANTHROPIC ? "stop_sequences"
                                                           : "stop",
                          stop_list(p)) != 0)
    return -1;
  return 0;
}

char *ludo__llm_body(int api, const char *model, const ludo__llm_params_t *p,
                     const ludo__llm_msg_t *msgs, size_t n, size_t *len,
                     char *err, size_t errlen) {
  json_t *body = json_object();
  char *text = NULL;
  if (body != NULL && set_str(body, "model", model, strlen(model)) == 0 &&
      add_messages(body, api, msgs, n) == 0 && add_params(body, api, p) == 0)
    text = json_dumps(body, JSON_COMPACT);
  json_decref(body);
  if (text == NULL) {
    snprintf(err, errlen, "cannot build the request (out of memory, or a "
             "message or stop sequence is not valid UTF-8)");
    return NULL;
  }
  *len = strlen(text);
  return text;
}

/* ---- replies ------------------------------------------------------------ */

static uint64_t count(json_t *usage, const char *k) {
  json_t *v = json_object_get(usage, k);
  return json_is_integer(v) && json_integer_value(v) > 0
             ? (uint64_t)json_integer_value(v)
             : 0;
}

static char *dup_n(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (d == NULL) return NULL;
  memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

static char *dup_str(json_t *v) {
  return json_is_string(v)
             ? dup_n(json_string_value(v), json_string_length(v))
             : NULL;
}

/* OpenAI: choices[0].message.content (null reads as ""). */
static int parse_openai(json_t *root, ludo__llm_reply_t *r) {
  json_t *c0 = json_array_get(json_object_get(root, "choices"), 0);
  json_t *msg = json_object_get(c0, "message");
  json_t *content = json_object_get(msg, "content");
  json_t *usage = json_object_get(root, "usage");
  if (!json_is_object(msg) || !(json_is_string(content) ||
                                json_is_null(content)))
    return -1;
  r->text = json_is_string(content) ? dup_str(content) : dup_n("", 0);
  r->text_len = json_is_string(content) ? json_string_length(content) : 0;
  r->finish = dup_str(json_object_get(c0, "finish_reason"));
  r->prompt_tokens = count(usage, "prompt_tokens");
  r->completion_tokens = count(usage, "completion_tokens");
  return r->text == NULL ? -1 : 0;
}

/* Anthropic: the text blocks of content[], joined. */
static int parse_anthropic(json_t *root, ludo__llm_reply_t *r) {
  json_t *content = json_object_get(root, "content"), *b;
  json_t *usage = json_object_get(root, "usage");
  size_t i, n = 0;
  if (!json_is_array(content)) return -1;
  json_array_foreach(content, i, b) {
    json_t *t = json_object_get(b, "text");
    if (json_is_string(t)) n += json_string_length(t);
  }
  if ((r->text = malloc(n + 1)) == NULL) return -1;
  n = 0;
  json_array_foreach(content, i, b) {
    json_t *t = json_object_get(b, "text");
    const char *type = json_string_value(json_object_get(b, "type"));
    if (!json_is_string(t) || (type && strcmp(type, "text") != 0)) continue;
    memcpy(r->text + n, json_string_value(t), json_string_length(t));
    n += json_string_length(t);
  }
  r->text[n] = '\0';
  r->text_len = n;
  r->finish = dup_str(json_object_get(root, "stop_reason"));
  r->prompt_tokens = count(usage, "input_tokens");
  r->completion_tokens = count(usage, "output_tokens");
  return 0;
}

int ludo__llm_parse(int api, const char *body, size_t len,
                    ludo__llm_reply_t *r, char *err, size_t errlen) {
  json_error_t je;
  json_t *root = json_loadb(body, len, 0, &je);
  int rc;
  memset(r, 0, sizeof *r);
  if (root == NULL) {
    snprintf(err, errlen, "malformed reply (not JSON: %s at byte %d)",
             je.text, je.position);
    return -1;
  }
  rc = api == LUDO__LLM_ANTHROPIC ? parse_anthropic(root, r)
                                  : parse_openai(root, r);
  json_decref(root);
  if (rc != 0) {
    ludo__llm_reply_free(r);
    snprintf(err, errlen, "malformed reply (no %s)",
             api == LUDO__LLM_ANTHROPIC ? "content[] array"
                                        : "choices[0].message.content");
  }
  return rc;
}

void ludo__llm_reply_free(ludo__llm_reply_t *r) {
  free(r->text);
  free(r->finish);
  r->text = r->finish = NULL;
}

/* ---- error bodies ------------------------------------------------------- */

static void copy_clean(const char *s, size_t len, char *out, size_t outlen) {
  size_t i, n = len < outlen - 1 ? len : outlen - 1;
  while (n > 0 && n < len && ((unsigned char)s[n] & 0xC0) == 0x80)
    n--; /* not inside a UTF-8 sequence */
  for (i = 0; i < n; i++)
    out[i] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? ' ' : s[i];
  while (n > 0 && out[n - 1] == ' ') n--;
  out[n] = '\0';
}

void ludo__llm_error_message(const char *body, size_t len, char *out,
                             size_t outlen) {
  json_t *root = json_loadb(body, len, 0, NULL);
  json_t *e = json_object_get(root, "error"), *m = NULL;
  if (json_is_string(e)) m = e;
  else if (json_is_object(e)) m = json_object_get(e, "message");
  if (!json_is_string(m)) m = json_object_get(root, "message");
  if (json_is_string(m))
    copy_clean(json_string_value(m), json_string_length(m), out, outlen);
  else
    copy_clean(body, len, out, outlen);
  json_decref(root);
}
