/* llmwire.c - request bodies and replies of the two LLM APIs (llmwire.h),
 * with jansson. */
#include "net/llmwire.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/jsonparse.h"
#include "base/realtext.h"
#include "base/utf8.h"

/* ---- requests ----------------------------------------------------------- */

/* The body is written straight into a buffer: a call's request is built
 * once per call, and a jansson tree (an allocation per value, a hash
 * table per object) cost several times the rest of the call's work. */

static const char HEX[] = "0123456789abcdef";

/* Appends `s` as a JSON string. -1: out of memory, or not UTF-8. */
static int put_str(ludo__buf_t *b, const char *s, size_t len) {
  size_t i, run = 0;
  if (ludo__utf8_check(s, len) != len || ludo__buf_reserve(b, len + 2) != 0)
    return -1;
  b->p[b->len++] = '"';
  for (i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    char esc[6] = {'\\', 0, 0, 0, 0, 0};
    size_t n = 2;
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    if (ludo__buf_add(b, s + run, i - run) != 0) return -1;
    run = i + 1;
    switch (c) {
    case '"': esc[1] = '"'; break;
    case '\\': esc[1] = '\\'; break;
    case '\b': esc[1] = 'b'; break;
    case '\f': esc[1] = 'f'; break;
    case '\n': esc[1] = 'n'; break;
    case '\r': esc[1] = 'r'; break;
    case '\t': esc[1] = 't'; break;
    default:
      memcpy(esc + 1, "u00", 3);
      esc[4] = HEX[c >> 4];
      esc[5] = HEX[c & 15];
      n = 6;
    }
    if (ludo__buf_add(b, esc, n) != 0) return -1;
  }
  if (ludo__buf_add(b, s + run, len - run) != 0) return -1;
  return ludo__buf_addc(b, '"');
}

/* Appends ",\"key\":" (no comma for the first member; `key` needs no
 * escaping). */
static int put_key(ludo__buf_t *b, const char *key, int first) {
  size_t n = strlen(key);
  if (ludo__buf_reserve(b, n + 4) != 0) return -1;
  if (!first) b->p[b->len++] = ',';
  b->p[b->len++] = '"';
  memcpy(b->p + b->len, key, n);
  b->len += n;
  b->p[b->len++] = '"';
  b->p[b->len++] = ':';
  b->p[b->len] = '\0';
  return 0;
}

/* A double as JSON: its shortest exact text, with ".0" when it would read
 * as an integer. */
static int put_real(ludo__buf_t *b, double v) {
  char t[40];
  ludo__real_text(v, t, sizeof t);
  if (strpbrk(t, ".eE") == NULL) strcat(t, ".0");
  return ludo__buf_adds(b, t);
}

static int put_message(ludo__buf_t *b, const ludo__llm_msg_t *m, int first) {
  if ((!first && ludo__buf_addc(b, ',') != 0) ||
      ludo__buf_addc(b, '{') != 0 || put_key(b, "role", 1) != 0 ||
      put_str(b, m->role, strlen(m->role)) != 0 ||
      put_key(b, "content", 0) != 0 ||
      put_str(b, m->content, m->content_len) != 0)
    return -1;
  return ludo__buf_addc(b, '}');
}

/* Anthropic's top-level "system": the system messages' text, joined by
 * blank lines (nothing when there is none). */
static int put_system(ludo__buf_t *b, const ludo__llm_msg_t *msgs, size_t n) {
  ludo__buf_t sys;
  size_t i;
  int rc = 0, any = 0;
  ludo__buf_init(&sys, ludo__alloc_default, NULL);
  for (i = 0; i < n && rc == 0; i++) {
    if (strcmp(msgs[i].role, "system") != 0) continue;
    if (any) rc = ludo__buf_add(&sys, "\n\n", 2);
    if (rc == 0) rc = ludo__buf_add(&sys, msgs[i].content, msgs[i].content_len);
    any = 1;
  }
  if (rc == 0 && any)
    rc = put_key(b, "system", 0) != 0 || put_str(b, sys.p, sys.len) != 0;
  ludo__buf_free(&sys);
  return rc ? -1 : 0;
}

static int put_messages(ludo__buf_t *b, int api, const ludo__llm_msg_t *msgs,
                        size_t n) {
  size_t i;
  int first = 1;
  if (put_key(b, "messages", 0) != 0 || ludo__buf_addc(b, '[') != 0)
    return -1;
  for (i = 0; i < n; i++) {
    if (api == LUDO__LLM_ANTHROPIC && strcmp(msgs[i].role, "system") == 0)
      continue;
    if (put_message(b, &msgs[i], first) != 0) return -1;
    first = 0;
  }
  if (ludo__buf_addc(b, ']') != 0) return -1;
  return api == LUDO__LLM_ANTHROPIC ? put_system(b, msgs, n) : 0;
}

static int put_params(ludo__buf_t *b, int api, const ludo__llm_params_t *p) {
  long max = p->max_tokens;
  size_t i;
  if (max == 0 && api == LUDO__LLM_ANTHROPIC)
    max = LUDO__LLM_ANTHROPIC_MAX_TOKENS;
  if (p->has_temperature && (put_key(b, "temperature", 0) != 0 ||
                             put_real(b, p->temperature) != 0))
    return -1;
  if (max > 0 && ludo__buf_printf(b, ",\"max_tokens\":%ld", max) != 0)
    return -1;
  if (p->nstop == 0) return 0;
  if (put_key(b, api == LUDO__LLM_ANTHROPIC ? "stop_sequences" : "stop",
              0) != 0 || ludo__buf_addc(b, '[') != 0)
    return -1;
  for (i = 0; i < p->nstop; i++)
    if ((i > 0 && ludo__buf_addc(b, ',') != 0) ||
        put_str(b, p->stop[i], strlen(p->stop[i])) != 0)
      return -1;
  return ludo__buf_addc(b, ']');
}

char *ludo__llm_body(int api, const char *model, const ludo__llm_params_t *p,
                     const ludo__llm_msg_t *msgs, size_t n, size_t *len,
                     char *err, size_t errlen) {
  ludo__buf_t b;
  ludo__buf_init(&b, ludo__alloc_default, NULL);
  if (ludo__buf_reserve(&b, 256) != 0 || ludo__buf_addc(&b, '{') != 0 ||
      put_key(&b, "model", 1) != 0 || put_str(&b, model, strlen(model)) != 0 ||
      put_messages(&b, api, msgs, n) != 0 || put_params(&b, api, p) != 0 ||
      ludo__buf_addc(&b, '}') != 0) {
    ludo__buf_free(&b);
    snprintf(err, errlen, "cannot build the request (out of memory, or a "
             "message or stop sequence is not valid UTF-8)");
    return NULL;
  }
  *len = b.len;
  return b.p; /* malloc'd: ludo__alloc_default is realloc/free */
}

/* ---- replies ------------------------------------------------------------ */

/* A reply is read with the strict SAX parser (base/jsonparse.h): no tree,
 * only the few members wanted are kept, by where they are. As a decoder
 * keeps the last of repeated keys, a key read again resets what its
 * earlier value gave. */

/* What the container at a depth is. */
enum { C_OTHER, C_ROOT, C_CHOICES, C_CHOICE0, C_MESSAGE, C_USAGE, C_BLOCKS,
       C_BLOCK };
/* What the value after the last key (or an array's element) is. */
enum { V_NONE, V_CHOICES, V_CHOICE0, V_MESSAGE, V_CONTENT, V_FINISH,
       V_USAGE, V_PROMPT, V_COMPLETION, V_BLOCKS, V_BLOCK, V_TEXT, V_TYPE };

#define RD_DEPTH 8

typedef struct {
  int api, depth;               /* containers open */
  unsigned char ctx[RD_DEPTH];  /* of each open container (deeper: other) */
  size_t index[RD_DEPTH];       /* elements of an open array so far */
  int next;                     /* V_*: meaning of the coming value */
  ludo__buf_t text, scratch;    /* the reply's text; unescaping */
  int has_text;                 /* OpenAI: message.content read */
  int null_text;                /* OpenAI: message.content is null (a
                                   refusal or a tool call: no text) */
  int has_blocks;               /* Anthropic: content[] read */
  size_t block_at;              /* Anthropic: where this block's text went */
  int block_text, block_type_ok;
  char *finish;
  uint64_t prompt, completion;
} rd_t;

static char *dup_n(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (d == NULL) return NULL;
  memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

static int key_is(const char *k, size_t n, const char *want) {
  return strlen(want) == n && memcmp(k, want, n) == 0;
}

/* A key read again: what its earlier value gave goes (a decoder keeps the
 * last of repeated keys). */
static void forget(rd_t *r) {
  switch (r->next) {
  case V_CHOICES:
    free(r->finish);
    r->finish = NULL;
    r->has_text = r->null_text = 0;
    ludo__buf_reset(&r->text);
    break;
  case V_MESSAGE: case V_CONTENT:
    r->has_text = r->null_text = 0;
    ludo__buf_reset(&r->text);
    break;
  case V_BLOCKS:
    r->has_blocks = 0;
    ludo__buf_reset(&r->text);
    break;
  case V_FINISH:
    free(r->finish);
    r->finish = NULL;
    break;
  case V_USAGE: r->prompt = r->completion = 0; break;
  case V_PROMPT: r->prompt = 0; break;
  case V_COMPLETION: r->completion = 0; break;
  case V_TEXT:
    r->block_text = 0;
    r->text.len = r->block_at;
    break;
  case V_TYPE: r->block_type_ok = 1; break;
  default: break;
  }
}

/* The meaning of the value after key `k` in the current object. */
static int r_key(void *ud, const char *k, size_t n) {
  rd_t *r = ud;
  int c = r->depth > 0 && r->depth <= RD_DEPTH ? r->ctx[r->depth - 1]
                                                : C_OTHER;
  int anth = r->api == LUDO__LLM_ANTHROPIC;
  r->next = V_NONE;
  if (c == C_ROOT) {
    if (key_is(k, n, "usage")) r->next = V_USAGE;
    else if (!anth && key_is(k, n, "choices")) r->next = V_CHOICES;
    else if (anth && key_is(k, n, "content")) r->next = V_BLOCKS;
    else if (anth && key_is(k, n, "stop_reason")) r->next = V_FINISH;
  } else if (c == C_CHOICE0) {
    if (key_is(k, n, "message")) r->next = V_MESSAGE;
    else if (key_is(k, n, "finish_reason")) r->next = V_FINISH;
  } else if (c == C_MESSAGE) {
    if (key_is(k, n, "content")) r->next = V_CONTENT;
  } else if (c == C_USAGE) {
    if (key_is(k, n, anth ? "input_tokens" : "prompt_tokens"))
      r->next = V_PROMPT;
    else if (key_is(k, n, anth ? "output_tokens" : "completion_tokens"))
      r->next = V_COMPLETION;
  } else if (c == C_BLOCK) {
    if (key_is(k, n, "text")) r->next = V_TEXT;
    else if (key_is(k, n, "type")) r->next = V_TYPE;
  }
  forget(r);
  return 0;
}

/* Every value starts here: an array's element gets its meaning. */
static int value(rd_t *r) {
  if (r->depth == 0 || r->depth > RD_DEPTH) return V_NONE;
  switch (r->ctx[r->depth - 1]) {
  case C_CHOICES:
    return r->index[r->depth - 1]++ == 0 ? V_CHOICE0 : V_NONE;
  case C_BLOCKS: return V_BLOCK;
  case C_OTHER: case C_ROOT: case C_CHOICE0: case C_MESSAGE: case C_USAGE:
  case C_BLOCK: break;
  }
  return r->next;
}

static int open_ctx(rd_t *r, int is_object) {
  int v = value(r), c = C_OTHER;
  r->next = V_NONE;
  if (r->depth == 0 && is_object) c = C_ROOT;
  else if (v == V_CHOICES && !is_object) c = C_CHOICES;
  else if (v == V_CHOICE0 && is_object) c = C_CHOICE0;
  else if (v == V_MESSAGE && is_object) c = C_MESSAGE;
  else if (v == V_USAGE && is_object) c = C_USAGE;
  else if (v == V_BLOCKS && !is_object) c = C_BLOCKS, r->has_blocks = 1;
  else if (v == V_BLOCK && is_object) {
    c = C_BLOCK;
    r->block_at = r->text.len;
    r->block_text = 0;
    r->block_type_ok = 1;
  }
  if (r->depth < RD_DEPTH) {
    r->ctx[r->depth] = (unsigned char)c;
    r->index[r->depth] = 0;
  }
  r->depth++;
  return 0;
}

static int r_begin_object(void *ud) { return open_ctx(ud, 1); }
static int r_begin_array(void *ud) { return open_ctx(ud, 0); }

static int r_end(void *ud) {
  rd_t *r = ud;
  r->depth--;
  if (r->depth < RD_DEPTH && r->ctx[r->depth] == C_BLOCK &&
      !(r->block_text && r->block_type_ok))
    r->text.len = r->block_at; /* not a text block: its text goes */
  r->next = V_NONE;
  return 0;
}

static int r_string(void *ud, const char *s, size_t n) {
  rd_t *r = ud;
  int v = value(r);
  r->next = V_NONE;
  if (v == V_CONTENT || v == V_TEXT) {
    if (ludo__buf_add(&r->text, s, n) != 0) return LUDO_ENOMEM;
    if (v == V_CONTENT) r->has_text = 1;
    else r->block_text = 1;
  } else if (v == V_FINISH) {
    if ((r->finish = dup_n(s, n)) == NULL) return LUDO_ENOMEM;
  } else if (v == V_TYPE) {
    r->block_type_ok = key_is(s, n, "text");
  }
  return 0;
}

static int r_null(void *ud) {
  rd_t *r = ud;
  /* null content is no text (a refusal, a tool call): never read as "",
   * which a judge would score. */
  if (value(r) == V_CONTENT) r->null_text = 1;
  r->next = V_NONE;
  return 0;
}

static int r_integer(void *ud, int64_t v) {
  rd_t *r = ud;
  int what = value(r);
  r->next = V_NONE;
  if (what == V_PROMPT) r->prompt = v > 0 ? (uint64_t)v : 0;
  if (what == V_COMPLETION) r->completion = v > 0 ? (uint64_t)v : 0;
  return 0;
}

static int r_other(rd_t *r) {
  value(r); /* counts an array's element */
  r->next = V_NONE;
  return 0;
}

static int r_bool(void *ud, int v) {
  (void)v;
  return r_other(ud);
}

static int r_real(void *ud, double v) {
  (void)v;
  return r_other(ud);
}

static char *r_scratch(void *ud, size_t n) {
  rd_t *r = ud;
  ludo__buf_reset(&r->scratch);
  return ludo__buf_reserve(&r->scratch, n) == 0 ? r->scratch.p : NULL;
}

static const ludo__jsonparse_cb_t READER = {
    r_null, r_bool, r_integer, r_real, r_string, r_key, r_begin_object,
    r_end, r_begin_array, r_end, r_scratch, NULL, NULL, NULL};

/* Hands what `rd` read to *r (0), or -1 when the wanted member is
 * missing. */
static int take(rd_t *rd, ludo__llm_reply_t *r) {
  int ok = rd->api == LUDO__LLM_ANTHROPIC ? rd->has_blocks : rd->has_text;
  if (!ok) return -1;
  if (ludo__buf_reserve(&rd->text, 0) != 0) return -1; /* p for "" */
  r->text = rd->text.p;
  r->text_len = rd->text.len;
  r->finish = rd->finish;
  r->prompt_tokens = rd->prompt;
  r->completion_tokens = rd->completion;
  ludo__buf_init(&rd->text, ludo__alloc_default, NULL);
  rd->finish = NULL;
  return 0;
}

/* The length of the parser's message without its " near '...'" part: the
 * quoted token is a piece of the reply, which may hold part of the API key
 * (a proxy echoing the header) that no redaction can recognise once cut.
 * The byte offset says where the reply went wrong. */
static int what_failed(const char *msg) {
  const char *near = strstr(msg, " near '");
  return (int)(near ? (size_t)(near - msg) : strlen(msg));
}

int ludo__llm_parse(int api, const char *body, size_t len,
                    ludo__llm_reply_t *r, char *err, size_t errlen) {
  rd_t rd;
  ludo__jsonparse_err_t je;
  int rc;
  memset(r, 0, sizeof *r);
  memset(&rd, 0, sizeof rd);
  rd.api = api;
  ludo__buf_init(&rd.text, ludo__alloc_default, NULL);
  ludo__buf_init(&rd.scratch, ludo__alloc_default, NULL);
  rc = ludo__jsonparse_run(body, len, LUDO__JSONPARSE_MAXDEPTH, &READER, &rd,
                           &je);
  if (rc == LUDO_ENOMEM)
    snprintf(err, errlen, "malformed reply (out of memory reading it)");
  else if (rc != 0)
    snprintf(err, errlen, "malformed reply (not JSON: %.*s at byte %zu)",
             what_failed(je.msg), je.msg, je.offset);
  else if ((rc = take(&rd, r)) != 0 && rd.null_text)
    snprintf(err, errlen, "malformed reply (choices[0].message.content is "
             "null: no text, as in a refusal or a tool call)");
  else if (rc != 0)
    snprintf(err, errlen, "malformed reply (no %s)",
             api == LUDO__LLM_ANTHROPIC ? "content[] array"
                                        : "choices[0].message.content");
  ludo__buf_free(&rd.text);
  ludo__buf_free(&rd.scratch);
  free(rd.finish);
  return rc == 0 ? 0 : -1;
}

void ludo__llm_reply_free(ludo__llm_reply_t *r) {
  free(r->text);
  free(r->finish);
  r->text = r->finish = NULL;
}

/* ---- error bodies ------------------------------------------------------- */

/* Copies s (len bytes) into out as text: control bytes become spaces,
 * bytes that are not valid UTF-8 (a server's raw body) become '?', cut
 * before a sequence that would not fit. */
static void copy_clean(const char *s, size_t len, char *out, size_t outlen) {
  size_t i = 0, n = 0;
  while (i < len && n + 1 < outlen) {
    size_t win = len - i < outlen + 4 ? len - i : outlen + 4; /* past the
                                                   room: never copied */
    size_t ok = ludo__utf8_check(s + i, win), take;
    if (ok == 0) { /* an invalid byte */
      out[n++] = '?';
      i++;
      continue;
    }
    take = ludo__utf8_cut(s + i, ok, outlen - 1 - n);
    if (take == 0) break;
    for (; take > 0; take--, i++, n++)
      out[n] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? ' ' : s[i];
  }
  while (n > 0 && out[n - 1] == ' ') n--;
  out[n] = '\0';
}

/* The most of an error body read as JSON: an API's error object is small,
 * and a tree of a bigger one (8 MiB of [0,0,...]) cost 170 MB outside the
 * runtime's allocator and the loop for most of a second. */
#define ERROR_JSON_MAX (64 * 1024)

void ludo__llm_error_message(const char *body, size_t len, char *out,
                             size_t outlen) {
  json_t *root = len <= ERROR_JSON_MAX ? json_loadb(body, len, 0, NULL)
                                        : NULL;
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
