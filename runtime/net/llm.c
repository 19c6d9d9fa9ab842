/* llm.c - LLM API clients and their calls on libcurl's multi handle
 * (llm.h). A call: waits for a slot in its group, sends its request,
 * reads the reply into a buffer bounded by max_response_bytes, and either
 * ends or waits (a uv_timer) and tries again. */
#include "net/llm.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "net/curlm.h"
#include "net/llmgroup.h"

struct ludo__llm_client_s {
  ludo__core_t *core;
  ludo__curlm_t *m;
  ludo__llm_group_t *group;
  ludo__llm_config_t cfg;       /* strings below are owned copies */
  char *url;                    /* the endpoint */
  CURLU *uh;                    /* the same, parsed once (NULL: curl
                                   parses c->url per request) */
  char *key;                    /* NULL when none; wiped on free */
  struct curl_slist *headers;   /* carry the key: never logged */
  int refs;                     /* the owner's and one per live call */
};

struct ludo__llm_call_s {
  ludo__llm_waiter_t w;         /* first: the group hands it back */
  ludo__llm_client_t *c;
  ludo__core_t *core;
  ludo__curlm_xfer_t x;
  char *body;
  size_t body_len;
  char *resp;                   /* the reply's body so far (heap) */
  size_t resp_len, resp_cap;
  int too_big;                /* 1: the body, 2: the headers went past
                                 their bound */
  int in_xfer, waiting, has_timer;
  size_t header_bytes;        /* of this attempt, trailers included */
  const char *fail_now;         /* a start that failed: ends on the timer */
  uv_timer_t timer;             /* waits before a retry */
  unsigned attempts;
  long status;
  uint64_t start_ns, rng;
  char errbuf[CURL_ERROR_SIZE];
  ludo__llm_done_fn done;
  void *ud;
};

void ludo__llm_config_init(ludo__llm_config_t *c) {
  memset(c, 0, sizeof *c);
  c->timeout_ms = LUDO__LLM_TIMEOUT_MS;
  c->max_concurrency = LUDO__LLM_CONCURRENCY;
  c->retries = LUDO__LLM_RETRIES;
  c->backoff_ms = LUDO__LLM_BACKOFF_MS;
  c->max_backoff_ms = LUDO__LLM_MAX_BACKOFF_MS;
  c->max_retry_after_ms = LUDO__LLM_MAX_RETRY_AFTER_MS;
  c->max_response_bytes = LUDO__LLM_MAX_RESPONSE;
}

uint64_t ludo__llm_retry_wait_ms(const ludo__llm_config_t *c, unsigned attempt,
                                 long retry_after_s, double rnd) {
  uint64_t cap = c->max_backoff_ms, exp = c->backoff_ms;
  unsigned i;
  if (retry_after_s > 0) /* s * 1000 <= cap, or the cap (no overflow) */
    return (uint64_t)retry_after_s <= c->max_retry_after_ms / 1000u
               ? (uint64_t)retry_after_s * 1000u
               : c->max_retry_after_ms;
  for (i = 1; i < attempt && exp < cap; i++) exp *= 2;
  if (exp > cap) exp = cap;
  return (uint64_t)(rnd * (double)(exp + 1));
}

long ludo__llm_retry_after_s(const char *v, time_t now) {
  long s = 0;
  time_t t;
  if (v == NULL) return -1;
  while (*v == ' ' || *v == '\t') v++;
  if (*v >= '0' && *v <= '9') {
    for (; *v >= '0' && *v <= '9'; v++)
      s = s > (LONG_MAX - (*v - '0')) / 10 ? LONG_MAX : s * 10 + (*v - '0');
    while (*v == ' ' || *v == '\t') v++;
    return *v == '\0' ? s : -1;
  }
  if ((t = curl_getdate(v, NULL)) == -1) return -1;
  return t <= now ? 0 : (t - now > LONG_MAX ? LONG_MAX : (long)(t - now));
}

/* The Retry-After of the last reply of `easy`, in seconds; -1 when none. */
static long retry_after(CURL *easy) {
  struct curl_header *h = NULL;
  if (curl_easy_header(easy, "Retry-After", 0, CURLH_HEADER, -1, &h) !=
          CURLHE_OK || h == NULL)
    return -1;
  return ludo__llm_retry_after_s(h->value, time(NULL));
}

/* ---- clients ------------------------------------------------------------ */

static char *copy_str(ludo__alloc_t *h, const char *s) {
  return s ? ludo__strndup(h, s, strlen(s)) : NULL;
}

static void free_str(ludo__alloc_t *h, char *s) {
  if (s) ludo__free(h, s, strlen(s) + 1);
}

/* The key's header line, wiped after curl copied it. */
static int add_key_header(ludo__llm_client_t *c) {
  const char *fmt = c->cfg.api == LUDO__LLM_ANTHROPIC
                        ? "x-api-key: %s" : "Authorization: Bearer %s";
  size_t n = strlen(c->key) + 32;
  char *line = malloc(n);
  struct curl_slist *l;
  if (line == NULL) return -1;
  snprintf(line, n, fmt, c->key);
  l = curl_slist_append(c->headers, line);
  memset(line, 0, n);
  free(line);
  if (l == NULL) return -1;
  c->headers = l;
  return 0;
}

static int build_headers(ludo__llm_client_t *c) {
  const char *lines[] = {"Content-Type: application/json", "Expect:",
                         c->cfg.api == LUDO__LLM_ANTHROPIC
                             ? "anthropic-version: 2023-06-01" : NULL};
  size_t i;
  for (i = 0; i < 3; i++) {
    struct curl_slist *l;
    if (lines[i] == NULL) continue;
    if ((l = curl_slist_append(c->headers, lines[i])) == NULL) return -1;
    c->headers = l;
  }
  return c->key != NULL && *c->key ? add_key_header(c) : 0;
}

static int check_config(const ludo__llm_config_t *cfg, char *err,
                        size_t errlen) {
  const char *u = cfg->base_url;
  if (u == NULL || (strncmp(u, "http://", 7) != 0 &&
                    strncmp(u, "https://", 8) != 0)) {
    snprintf(err, errlen, "base_url must start with http:// or https://");
    return -1;
  }
  if (cfg->model == NULL || *cfg->model == '\0') {
    snprintf(err, errlen, "model must be a non-empty string");
    return -1;
  }
  if (cfg->max_concurrency < 1 || cfg->timeout_ms < 1 ||
      cfg->max_response_bytes < 1) {
    snprintf(err, errlen, "max_concurrency, timeout_ms and "
             "max_response_bytes must be at least 1");
    return -1;
  }
  return 0;
}

/* "{base_url}/chat/completions" or "{base_url}/messages". */
static char *endpoint(ludo__alloc_t *h, const ludo__llm_config_t *cfg) {
  const char *tail = cfg->api == LUDO__LLM_ANTHROPIC ? "/messages"
                                                     : "/chat/completions";
  size_t n = strlen(cfg->base_url), t = strlen(tail);
  char *u;
  while (n > 0 && cfg->base_url[n - 1] == '/') n--;
  u = ludo__malloc(h, n + t + 1);
  if (u == NULL) return NULL;
  memcpy(u, cfg->base_url, n);
  memcpy(u + n, tail, t + 1);
  return u;
}

/* Joins the group of (api, url, model). */
static int join_group(ludo__llm_client_t *c) {
  char key[4096];
  int n = snprintf(key, sizeof key, "%d\n%s\n%s", c->cfg.api, c->url,
                   c->cfg.model);
  if (n < 0 || (size_t)n >= sizeof key) n = sizeof key - 1;
  c->group = ludo__llm_group_join(c->m, key, (size_t)n,
                                  c->cfg.max_concurrency);
  return c->group ? 0 : -1;
}

/* The endpoint parsed once for all the client's requests
 * (CURLOPT_CURLU): a URL given as a string curl parses again for each.
 * NULL when curl refuses it: requests then give curl the string, and the
 * call fails with curl's words, as without this. */
static CURLU *parse_url(const char *url) {
  CURLU *uh = curl_url();
  if (uh != NULL && curl_url_set(uh, CURLUPART_URL, url, 0) != CURLUE_OK) {
    curl_url_cleanup(uh);
    uh = NULL;
  }
  return uh;
}

static void client_release(ludo__llm_client_t *c) {
  ludo__alloc_t *h = &c->core->heap;
  if (--c->refs > 0) return;
  if (c->group) ludo__llm_group_leave(c->group);
  curl_slist_free_all(c->headers); /* curl's copy of the key line */
  if (c->key) {
    size_t n = strlen(c->key);
    memset(c->key, 0, n);
    ludo__free(h, c->key, n + 1);
  }
  if (c->uh) curl_url_cleanup(c->uh);
  free_str(h, c->url);
  free_str(h, (char *)c->cfg.base_url);
  free_str(h, (char *)c->cfg.model);
  ludo__free(h, c, sizeof *c);
}

int ludo__llm_client_new(ludo__core_t *core, const ludo__llm_config_t *cfg,
                         ludo__llm_client_t **out, char *err, size_t errlen) {
  ludo__llm_client_t *c;
  ludo__curlm_t *m;
  int rc;
  *out = NULL;
  if (check_config(cfg, err, errlen) != 0) return LUDO_EINVAL;
  if ((rc = ludo__curlm_get(core, &m)) != 0) return rc;
  if ((c = ludo__calloc(&core->heap, sizeof *c)) == NULL) return LUDO_ENOMEM;
  c->core = core;
  c->m = m;
  c->refs = 1;
  c->cfg = *cfg;
  c->cfg.base_url = copy_str(&core->heap, cfg->base_url);
  c->cfg.model = copy_str(&core->heap, cfg->model);
  c->cfg.api_key = NULL;
  c->key = copy_str(&core->heap, cfg->api_key);
  c->url = endpoint(&core->heap, cfg);
  if (c->cfg.base_url == NULL || c->cfg.model == NULL || c->url == NULL ||
      (cfg->api_key && c->key == NULL) || build_headers(c) != 0 ||
      join_group(c) != 0) {
    client_release(c);
    return LUDO_ENOMEM;
  }
  c->uh = parse_url(c->url);
  *out = c;
  return 0;
}

void ludo__llm_client_free(ludo__llm_client_t *c) {
  if (c) client_release(c);
}

int ludo__llm_client_api(const ludo__llm_client_t *c) { return c->cfg.api; }

const char *ludo__llm_client_model(const ludo__llm_client_t *c) {
  return c->cfg.model;
}

/* ---- freeing a call ----------------------------------------------------- */

static void timer_closed(uv_handle_t *h) {
  ludo__llm_call_t *call = h->data;
  ludo__core_t *core = call->core;
  ludo__free(&core->heap, call, sizeof *call);
  ludo__core_handle_closed(core);
}

/* Frees the call (out of its group and the multi handle already). */
static void call_free(ludo__llm_call_t *call) {
  ludo__llm_client_t *c = call->c;
  ludo__core_t *core = c->core;
  if (call->x.easy) ludo__curlm_easy_release(c->m, call->x.easy);
  if (call->body) ludo__free(&core->heap, call->body, call->body_len + 1);
  if (call->resp) ludo__free(&core->heap, call->resp, call->resp_cap);
  client_release(c);
  if (call->has_timer)
    uv_close((uv_handle_t *)&call->timer, timer_closed);
  else
    ludo__free(&core->heap, call, sizeof *call);
}

/* ---- ending a call ------------------------------------------------------ */

/* Replaces every copy of the client's key in `s` by "[redacted]". */
static void redact_key(const ludo__llm_client_t *c, char *s, size_t size) {
  size_t k = c->key ? strlen(c->key) : 0;
  char *p;
  if (k < 4) return;
  while ((p = strstr(s, c->key)) != NULL) {
    const char *r = "[redacted]";
    size_t rl = strlen(r), tail = strlen(p + k);
    if ((size_t)(p - s) + rl + tail + 1 > size) {
      memset(p, '*', k);
      continue;
    }
    memmove(p + rl, p + k, tail + 1);
    memcpy(p, r, rl);
  }
}

/* Where, in `s` cut at `n`, a "[redacted]" is cut, or an end of `s`
 * starts the client's key (4 bytes or more of it); n when neither. */
static size_t cut_marker_at(const ludo__llm_client_t *c, const char *s,
                            size_t n, const char *r) {
  size_t k = c->key ? strlen(c->key) : 0, rl = strlen(r), l;
  const char *p;
  for (p = strstr(s, r); p != NULL && (size_t)(p - s) < n; /* uncut s */
       p = strstr(p + 1, r))
    if ((size_t)(p - s) + rl > n) return (size_t)(p - s);
  for (l = k > 0 && k - 1 < n ? k - 1 : n; k >= 4 && l >= 4; l--)
    if (memcmp(s + n - l, c->key, l) == 0) return n - l;
  return n;
}

/* Cuts `s` (its key copies redacted already) to at most size - 1 bytes,
 * not inside a UTF-8 sequence. A "[redacted]" the cut goes through, or an
 * end that starts the key, becomes a whole "[redacted]". */
static void cut_redacted(const ludo__llm_client_t *c, char *s, size_t size) {
  const char *r = "[redacted]";
  size_t n = strlen(s), rl = strlen(r), at;
  if (n < size) return;
  n = size - 1;
  while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--;
  at = cut_marker_at(c, s, n, r);
  s[n] = '\0';
  if (at == n || size <= rl) return;
  if (at + rl > size - 1) at = size - 1 - rl;
  while (at > 0 && ((unsigned char)s[at] & 0xC0) == 0x80) at--;
  memcpy(s + at, r, rl + 1);
}

/* The message of an error reply (its body) in `out`, the key redacted
 * before the message is cut to fit: no part of the key stays. */
static void body_message(ludo__llm_call_t *call, char *out, size_t size) {
  ludo__alloc_t *h = &call->c->core->heap;
  size_t n = call->resp_len + 1;
  char *full = ludo__malloc(h, n);
  if (full == NULL) {
    snprintf(out, size, "(error reply not shown: out of memory)");
    return;
  }
  ludo__llm_error_message(call->resp ? call->resp : "", call->resp_len,
                          full, n);
  redact_key(call->c, full, n);
  cut_redacted(call->c, full, size < n ? size : n);
  snprintf(out, size, "%s", full);
  ludo__free(h, full, n);
}

static void finish(ludo__llm_call_t *call, ludo__llm_result_t *r) {
  ludo__llm_client_t *c = call->c;
  r->status = call->status;
  r->attempts = call->attempts;
  r->latency_ms = (double)(ludo__clock_ns() - call->start_ns) / 1e6;
  ludo__llm_group_exit(c->group, &call->w); /* others may start */
  call->done(r, call->ud);
  call_free(call);
}

static void fail(ludo__llm_call_t *call, const char *fmt, const char *what) {
  ludo__llm_result_t r;
  char msg[1024], more[48] = "";
  if (call->attempts > 1)
    snprintf(more, sizeof more, " (after %u attempts)", call->attempts);
  snprintf(msg, sizeof msg, fmt, call->status, what, more);
  redact_key(call->c, msg, sizeof msg);
  memset(&r, 0, sizeof r);
  r.error = msg;
  finish(call, &r);
}

/* Replaces every copy of the client's key in *s (len bytes, malloc'd like
 * the reply's strings) by "[redacted]": a server can echo the key it was
 * sent into the reply's text or finish reason. With no memory for the
 * copy, *s becomes an empty string (or NULL): the key is never kept. */
static void redact_reply_string(const ludo__llm_client_t *c, char **s,
                                size_t *len) {
  size_t k = c->key ? strlen(c->key) : 0, n = *len, out = 0;
  const char *r = "[redacted]", *p = *s, *hit;
  size_t rl = strlen(r);
  char *copy;
  if (k < 4 || *s == NULL || memmem(*s, n, c->key, k) == NULL) return;
  copy = malloc(n / k * rl + n + 1); /* each key becomes at most rl bytes */
  if (copy != NULL) {
    while ((hit = memmem(p, (size_t)(*s + n - p), c->key, k)) != NULL) {
      memcpy(copy + out, p, (size_t)(hit - p));
      out += (size_t)(hit - p);
      memcpy(copy + out, r, rl);
      out += rl;
      p = hit + k;
    }
    memcpy(copy + out, p, (size_t)(*s + n - p));
    out += (size_t)(*s + n - p);
    copy[out] = '\0';
  }
  free(*s);
  *s = copy;
  *len = out;
}

static void succeed(ludo__llm_call_t *call) {
  ludo__llm_reply_t rep;
  ludo__llm_result_t r;
  char err[256];
  if (ludo__llm_parse(call->c->cfg.api, call->resp ? call->resp : "",
                      call->resp_len, &rep, err, sizeof err) != 0) {
    fail(call, "ELLM: %ld %s%s", err);
    return;
  }
  {
    size_t flen = rep.finish ? strlen(rep.finish) : 0;
    redact_reply_string(call->c, &rep.text, &rep.text_len);
    if (rep.finish != NULL) redact_reply_string(call->c, &rep.finish, &flen);
  }
  memset(&r, 0, sizeof r);
  r.ok = 1;
  r.text = rep.text;
  r.text_len = rep.text_len;
  r.finish = rep.finish;
  r.prompt_tokens = rep.prompt_tokens;
  r.completion_tokens = rep.completion_tokens;
  finish(call, &r);
  ludo__llm_reply_free(&rep);
}

/* ---- attempts ----------------------------------------------------------- */

static void attempt(ludo__llm_call_t *call);

static void on_timer(uv_timer_t *t) {
  ludo__llm_call_t *call = t->data;
  call->waiting = 0;
  if (call->fail_now != NULL)
    fail(call, "ELLM: %ld %s%s", call->fail_now);
  else
    attempt(call);
}

static int arm_timer(ludo__llm_call_t *call, uint64_t ms) {
  if (!call->has_timer) {
    if (uv_timer_init(call->c->core->loop, &call->timer) != 0) return -1;
    call->timer.data = call;
    call->has_timer = 1;
    ludo__core_handle_opened(call->c->core);
  }
  call->waiting = 1;
  uv_timer_start(&call->timer, on_timer, ms, 0);
  return 0;
}

static double next_rnd(ludo__llm_call_t *call) {
  uint64_t x = call->rng; /* xorshift64 */
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  call->rng = x;
  return (double)(x >> 11) / 9007199254740992.0;
}

static int retryable(CURLcode rc, long status) {
  if (rc == CURLE_OK) return status == 429 || status >= 500;
  switch (rc) {
  case CURLE_COULDNT_CONNECT: case CURLE_COULDNT_RESOLVE_HOST:
  case CURLE_OPERATION_TIMEDOUT: case CURLE_GOT_NOTHING:
  case CURLE_RECV_ERROR: case CURLE_SEND_ERROR: case CURLE_PARTIAL_FILE:
  case CURLE_SSL_CONNECT_ERROR: case CURLE_HTTP2: case CURLE_HTTP2_STREAM:
    return 1;
  default:
    return 0;
  }
}

/* The failure of an attempt that will not be retried. */
static void fail_attempt(ludo__llm_call_t *call, CURLcode rc) {
  char msg[512];
  if (call->too_big == 2) {
    snprintf(msg, sizeof msg, "reply headers (trailers included) larger "
             "than %d bytes", LUDO__LLM_MAX_HEADER_BYTES);
    fail(call, "ELLM: %ld %s%s", msg);
  } else if (call->too_big) {
    snprintf(msg, sizeof msg, "reply larger than max_response_bytes (%zu)",
             call->c->cfg.max_response_bytes);
    fail(call, "ELLM: %ld %s%s", msg);
  } else if (rc == CURLE_OPERATION_TIMEDOUT) {
    snprintf(msg, sizeof msg, "no reply within timeout_ms (%u)",
             (unsigned)call->c->cfg.timeout_ms);
    fail(call, "ELLM: %ld timeout: %s%s", msg);
  } else if (rc != CURLE_OK) {
    fail(call, "ELLM: %ld connection failed: %s%s",
         call->errbuf[0] ? call->errbuf : curl_easy_strerror(rc));
  } else {
    body_message(call, msg, sizeof msg);
    fail(call, "ELLM: %ld %s%s", *msg ? msg : "(empty body)");
  }
}

static void xfer_done(CURL *easy, CURLcode rc, void *ud) {
  ludo__llm_call_t *call = ud;
  long after = -1;
  call->in_xfer = 0;
  call->status = 0;
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &call->status);
  if (rc == CURLE_ABORTED_BY_CALLBACK && !call->too_big) {
    fail(call, "ELLM: %ld %s%s", "the runtime closed");
    return;
  }
  if (rc == CURLE_OK && call->status >= 200 && call->status < 300) {
    succeed(call);
    return;
  }
  if (call->too_big || !retryable(rc, call->status) ||
      call->attempts > call->c->cfg.retries) {
    fail_attempt(call, rc);
    return;
  }
  if (rc == CURLE_OK) after = retry_after(easy);
  if (arm_timer(call, ludo__llm_retry_wait_ms(&call->c->cfg, call->attempts,
                                              after,
                                              next_rnd(call))) != 0)
    fail_attempt(call, rc);
}

/* The first size of the reply's buffer: its Content-Length when the
 * server sent one (one allocation, no copying), else 1 KiB. */
static size_t first_cap(ludo__llm_call_t *call) {
  curl_off_t cl = -1;
  curl_easy_getinfo(call->x.easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
  if (cl > 0 && (uint64_t)cl < call->c->cfg.max_response_bytes)
    return (size_t)cl + 1;
  return 1024;
}

/* Counts the reply's header lines: curl bounds the headers but not the
 * trailers of a chunked reply, which a server can send for ever. */
static size_t on_header(char *p, size_t size, size_t n, void *ud) {
  ludo__llm_call_t *call = ud;
  (void)p;
  call->header_bytes += size * n;
  if (call->header_bytes > LUDO__LLM_MAX_HEADER_BYTES) {
    call->too_big = 2;
    return 0; /* curl ends the transfer */
  }
  return size * n;
}

static size_t on_write(char *p, size_t size, size_t n, void *ud) {
  ludo__llm_call_t *call = ud;
  ludo__alloc_t *h = &call->c->core->heap;
  size_t len = size * n, want = call->resp_len + len + 1, cap;
  if (call->resp_len + len > call->c->cfg.max_response_bytes) {
    call->too_big = 1;
    return 0; /* curl ends the transfer: CURLE_WRITE_ERROR */
  }
  if (want > call->resp_cap) {
    char *r;
    cap = call->resp_cap ? call->resp_cap : first_cap(call);
    while (cap < want) cap *= 2;
    r = ludo__realloc(h, call->resp, call->resp_cap, cap);
    if (r == NULL) return 0;
    call->resp = r;
    call->resp_cap = cap;
  }
  memcpy(call->resp + call->resp_len, p, len);
  call->resp_len += len;
  call->resp[call->resp_len] = '\0';
  return len;
}

static int setup_easy(ludo__llm_call_t *call) {
  ludo__llm_client_t *c = call->c;
  CURL *e = call->x.easy = ludo__curlm_easy(c->m);
  if (e == NULL) return -1;
  if (c->uh)
    curl_easy_setopt(e, CURLOPT_CURLU, c->uh);
  else
    curl_easy_setopt(e, CURLOPT_URL, c->url);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_POST, 1L);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, call->body);
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)call->body_len);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->headers);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, call);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, call);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)c->cfg.timeout_ms);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, call->errbuf);
  return 0;
}

static void attempt(ludo__llm_call_t *call) {
  call->attempts++;
  call->resp_len = 0;
  call->too_big = 0;
  call->header_bytes = 0;
  call->errbuf[0] = '\0';
  if ((call->x.easy == NULL && setup_easy(call) != 0) ||
      ludo__curlm_add(call->c->m, &call->x, xfer_done, call) != 0) {
    call->fail_now = "cannot start the request (out of memory)";
    if (arm_timer(call, 0) != 0) abort(); /* uv_timer_init cannot fail */
    return;
  }
  call->in_xfer = 1;
}

static void on_slot(ludo__llm_waiter_t *w) {
  attempt((ludo__llm_call_t *)w);
}

int ludo__llm_call_start(ludo__llm_client_t *c, const char *body, size_t len,
                         ludo__llm_done_fn done, void *ud,
                         ludo__llm_call_t **out) {
  ludo__llm_call_t *call = ludo__calloc(&c->core->heap, sizeof *call);
  if (call == NULL) return LUDO_ENOMEM;
  call->body = ludo__strndup(&c->core->heap, body, len);
  if (call->body == NULL) {
    ludo__free(&c->core->heap, call, sizeof *call);
    return LUDO_ENOMEM;
  }
  call->body_len = len;
  call->c = c;
  call->core = c->core;
  c->refs++;
  call->done = done;
  call->ud = ud;
  call->start_ns = ludo__clock_ns();
  call->rng = call->start_ns ^ (uint64_t)(uintptr_t)call ^ 0x9e3779b97f4a7c15u;
  if (call->rng == 0) call->rng = 1;
  call->w.start = on_slot;
  *out = call;
  ludo__llm_group_enter(c->group, &call->w); /* may start it now */
  return 0;
}

void ludo__llm_call_cancel(ludo__llm_call_t *call) {
  if (call->in_xfer) ludo__curlm_remove(call->c->m, &call->x);
  call->in_xfer = 0;
  if (call->waiting) uv_timer_stop(&call->timer);
  ludo__llm_group_exit(call->c->group, &call->w);
  call_free(call);
}
