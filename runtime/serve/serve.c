/* serve.c - the server object (options, listening, closing), the first
 * look at every request (authentication, upgrades), and the session
 * records: capacity, ids, calls with their continuations, idle reaping.
 * In a group of workers, ids name the worker ("w<N>-<uuid>") and records
 * of other workers' sessions (proxies) hand their calls to forward.c. */
#include "serve/internal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define DEFAULT_MAX_SESSIONS 1024
#define DEFAULT_HTTP_SESSION_TIMEOUT_MS 300000
#define DEFAULT_MAX_CONNECTIONS 16384
#define DEFAULT_DRAIN_TIMEOUT_MS 10000
#define DEFAULT_MAX_OUTPUT_BYTES ((size_t)256 << 20)

static void serve_closer(ludo__closer_t *cl);

void ludo__serve_shared_init(ludo__serve_shared_t *sh) {
  unsigned i;
  atomic_init(&sh->open, 0);
  for (i = 0; i < LUDO_SERVER_MAX_WORKERS; i++) {
    atomic_init(&sh->spare[i], 0);
    atomic_init(&sh->oldest[i], UINT64_MAX);
  }
  atomic_init(&sh->output.used, 0);
  atomic_init(&sh->output.max, DEFAULT_MAX_OUTPUT_BYTES);
  atomic_init(&sh->input.used, 0);
  atomic_init(&sh->input.max, DEFAULT_MAX_OUTPUT_BYTES);
  ludo__metrics_init(&sh->metrics);
  sh->metrics.output = &sh->output;
  sh->metrics.input = &sh->input;
}

uint64_t sv_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t sv_now_ms(ludo__serve_t *sv) { return uv_now(sv->core->loop); }

/* The shared count can read one over the maximum for a moment: an open
 * counts itself first and takes the count back when it finds no room
 * (sv_sess_open), so other threads may read its claim. No more sessions
 * than the maximum ever exist; reports say so. */
unsigned sv_active_sessions(ludo__serve_t *sv) {
  unsigned n = atomic_load(&sv->shared->open);
  return n < sv->o.max_sessions ? n : sv->o.max_sessions;
}

void sv_capacity_text(ludo__serve_t *sv, char *buf, size_t n) {
  snprintf(buf, n, "Server at capacity: %u/%u sessions active. Cannot "
           "accept new connections.",
           sv_active_sessions(sv), sv->o.max_sessions);
}

/* ---- session records -------------------------------------------------- */

static unsigned hash_id(const char *id) {
  unsigned h = 2166136261u;
  for (; *id; id++) h = (h ^ (unsigned char)*id) * 16777619u;
  return h % SV_BUCKETS;
}

sv_sess_t *sv_sess_find(ludo__serve_t *sv, const char *id) {
  sv_sess_t *x;
  for (x = sv->buckets[hash_id(id)]; x; x = x->hnext)
    if (!x->dead && strcmp(x->id, id) == 0) return x;
  return NULL;
}

static void unhash(sv_sess_t *x) {
  sv_sess_t **pp;
  if (x->id[0] == '\0') return;
  for (pp = &x->sv->buckets[hash_id(x->id)]; *pp; pp = &(*pp)->hnext) {
    if (*pp == x) {
      *pp = x->hnext;
      break;
    }
  }
}

/* Gives x's capacity slot back, once: at close, not when x is freed (a
 * call's continuation may hold x a while after its answer went out, and a
 * client that read the answer may ask for a session at once); for a
 * session made for one request, before its answer (sv_sess_release_slot). */
static void give_back_slot(sv_sess_t *x) {
  if (x->slot_given) return; /* gone already, or to a newcomer (reclaim.c) */
  x->slot_given = 1;
  atomic_fetch_sub(&x->sv->shared->open, 1);
}

/* Frees the record: the session is closed and no callback will come. */
static void sess_free(sv_sess_t *x) {
  ludo__serve_t *sv = x->sv;
  sv_reclaim_drop(x);
  give_back_slot(x);
  unhash(x);
  if (x->prev) x->prev->next = x->next;
  else sv->sessions = x->next;
  if (x->next) x->next->prev = x->prev;
  sv->nsessions--;
  if (sv->wm) atomic_fetch_sub(&sv->wm->sessions_open, 1);
  atomic_fetch_add(&sv->shared->metrics.sessions_closed, 1);
  atomic_fetch_sub(&sv->shared->metrics.sessions_open, 1);
  if (x->rpc_id) json_decref(x->rpc_id);
  ludo__free(&sv->core->heap, x->pending, x->pending_len + 1);
  ludo__free(&sv->core->heap, x, sizeof *x);
  if (sv->closing) sv_maybe_finish(sv);
}

static void on_open(ludo_session_t *s, int status, void *ud) {
  sv_sess_t *x = ud;
  ludo__serve_t *sv = x->sv;
  sv_done_fn done = x->done;
  int draining = sv->draining; /* read first: sess_free may free sv when
                                  it is closing, never while it drains */
  x->opening = 0;
  if (status == 0) {
    x->s = s;
    if (sv->group && sv_group_size(sv->group) > 1) /* names the worker */
      snprintf(x->id, sizeof x->id, "w%u-%s", sv->worker, s->id);
    else
      snprintf(x->id, sizeof x->id, "%s", s->id);
    x->hnext = sv->buckets[hash_id(x->id)];
    sv->buckets[hash_id(x->id)] = x;
    s->nest_metadata = 1;
    s->strict = sv->o.strict != 0;
  }
  if (x->dead) { /* closed while opening */
    if (s) ludo__session_close(s);
    x->s = NULL;
    sess_free(x);
  } else if (status != 0) {
    const char *msg = "the environment could not open a session";
    x->dead = 1;
    if (done) done(x, status, msg, strlen(msg));
    sess_free(x);
  } else if (done) {
    done(x, 0, "", 0);
  }
  if (draining) sv_drain_check(sv); /* it waited for this open */
}

sv_sess_t *sv_sess_open(ludo__serve_t *sv, int kind, sv_done_fn done,
                        int *why) {
  sv_sess_t *x;
  unsigned n;
  if (sv->closing) {
    *why = LUDO_ECLOSED;
    return NULL;
  }
  n = atomic_fetch_add(&sv->shared->open, 1);
  if (n >= sv->o.max_sessions) {
    atomic_fetch_sub(&sv->shared->open, 1);
    /* An idle HTTP session gives way: its slot, counted, is ours. */
    if (!sv_reclaim_slot(sv)) {
      ludo__metrics_proto(&sv->shared->metrics, LUDO__MERR_CAPACITY);
      *why = LUDO_EBUSY;
      return NULL;
    }
  }
  x = ludo__calloc(&sv->core->heap, sizeof *x);
  if (x == NULL) {
    atomic_fetch_sub(&sv->shared->open, 1);
    *why = LUDO_ENOMEM;
    return NULL;
  }
  x->sv = sv;
  x->kind = kind;
  x->opening = 1;
  x->done = done;
  x->last_ms = sv_now_ms(sv);
  x->next = sv->sessions;
  if (sv->sessions) sv->sessions->prev = x;
  sv->sessions = x;
  sv->nsessions++;
  if (sv->wm) atomic_fetch_add(&sv->wm->sessions_open, 1);
  atomic_fetch_add(&sv->shared->metrics.sessions_opened, 1);
  atomic_fetch_add(&sv->shared->metrics.sessions_open, 1);
  if (ludo__session_open_async(sv->env, on_open, x) != 0) {
    x->opening = 0;
    x->dead = 1;
    sess_free(x);
    *why = LUDO_ENOMEM;
    return NULL;
  }
  return x;
}

static void on_call(ludo_session_t *s, int status, const char *data,
                    size_t len, void *ud) {
  sv_sess_t *x = ud;
  ludo__serve_t *sv = x->sv;
  sv_done_fn done = x->done;
  (void)s;
  x->busy = 0;
  x->done = NULL;
  /* Idle time counts from the end of the last call: a step longer than
   * the timeout is not idleness. */
  if (x->call != LUDO__CALL_STATE) x->last_ms = sv_now_ms(sv);
  if (status != 0) ludo__metrics_error(&x->sv->shared->metrics, status);
  /* Idle now, it may give way: before its answer goes, so that a client
   * asking for a new session as soon as it has the answer finds it so. */
  sv_reclaim_note(x);
  x->in_cb++;
  if (done) done(x, status, data, len);
  /* The call may have been another client's (a WebSocket that left, an
   * HTTP request): the one attached now goes on with what it sent. */
  if (!x->dead && !x->busy && x->ws != NULL) sv_ws_pump(x->ws);
  x->in_cb--;
  if (x->dead && !x->busy && x->in_cb == 0 && x->in_close == 0) {
    if (x->s) { /* closed from the continuation */
      ludo_session_t *t = x->s;
      x->s = NULL;
      ludo__session_close(t);
    }
    sess_free(x);
  }
  if (sv->draining) sv_drain_check(sv);
}

int sv_sess_call(sv_sess_t *x, int kind, const char *json, size_t len,
                 sv_done_fn done) {
  uint32_t wall_ms = x->wall_ms; /* this call's alone, started or not */
  int rc;
  x->wall_ms = 0;
  if (x->owner) return sv_proxy_call(x, kind, json, len, done);
  /* During the drain the calls of requests that came before the stop
   * still start (a throwaway session that opened, a forwarded call); new
   * requests are refused before they get here (on_request). */
  if (x->dead || x->s == NULL || (x->sv->closing && !x->sv->draining))
    return LUDO_ECLOSED;
  if (x->busy) return LUDO_EBUSY;
  x->busy = 1;
  x->call = kind;
  x->done = done;
  if (kind != LUDO__CALL_STATE) x->last_ms = sv_now_ms(x->sv);
  x->s->call_wall_ns = (uint64_t)wall_ms * 1000000u;
  rc = ludo__session_call(x->s, kind, json, len, on_call, x, NULL, NULL);
  if (rc != 0) {
    x->s->call_wall_ns = 0;
    x->busy = 0;
    x->done = NULL;
    sv_reclaim_note(x);
  }
  return rc;
}

void sv_sess_close(sv_sess_t *x) {
  ludo_session_t *s;
  if (x->owner) {
    sv_proxy_close(x);
    return;
  }
  if (x->dead) return;
  sv_reclaim_drop(x);
  x->dead = 1;
  give_back_slot(x);
  if (x->ws && x->ws->sess == x) x->ws->sess = NULL;
  x->ws = NULL;
  x->caller = NULL;
  if (x->opening) return; /* on_open frees it */
  s = x->s;
  x->s = NULL;
  /* A call in flight ends with ECANCELED inside the close: its
   * continuation runs (and sees x->dead). */
  x->in_close++;
  if (s) ludo__session_close(s);
  x->in_close--;
  if (x->busy || x->in_cb) return; /* on_call frees it */
  sess_free(x);
}

void sv_sess_release_slot(sv_sess_t *x) {
  if (x->kind == SV_SESS_EPHEMERAL && !x->owner) give_back_slot(x);
}

void sv_sess_detach(sv_sess_t *x) {
  /* A call in flight from a WebSocket came from this one (the only one
   * attached since it started): its answer has nowhere to go now. */
  x->ws = NULL;
  x->caller = NULL;
  if (x->owner) sv_proxy_detach(x);
  else sv_reclaim_note(x);
}

unsigned ludo__serve_sessions(const ludo__serve_t *sv) {
  return sv->nsessions;
}

/* ---- idle reaping ----------------------------------------------------- */

static uint32_t timeout_of(ludo__serve_t *sv, const sv_sess_t *x) {
  if (x->kind == SV_SESS_HTTP || x->kind == SV_SESS_MCP)
    return sv->o.http_session_timeout_ms;
  return sv->o.session_timeout_ms;
}

static void on_reap(uv_timer_t *t) {
  ludo__serve_t *sv = t->data;
  uint64_t now = sv_now_ms(sv);
  sv_sess_t *x, *next;
  sv_reclaim_pay(sv); /* owed to another worker, if its message was lost */
  for (x = sv->sessions; x; x = next) {
    uint32_t limit = timeout_of(sv, x);
    next = x->next;
    if (x->dead || x->opening || x->busy || limit == 0 ||
        now - x->last_ms <= limit)
      continue;
    if ((x->kind == SV_SESS_MCP || x->kind == SV_SESS_HTTP) &&
        x->ws != NULL)
      continue; /* attached to a WebSocket: it lives as long (OpenEnv) */
    if (x->ws != NULL) {
      char msg[128];
      snprintf(msg, sizeof msg, "Session %s was idle for more than %u s "
               "and has been closed", x->id, (unsigned)(limit / 1000));
      sv_ws_error(x->ws, "SESSION_ERROR", msg, NULL);
      sv_ws_close(x->ws, 1000, "idle timeout");
    } else {
      sv_sess_close(x);
    }
  }
}

static void reaper_start(ludo__serve_t *sv) {
  uint32_t a = sv->o.session_timeout_ms, b = sv->o.http_session_timeout_ms;
  uint32_t m = a && (a < b || !b) ? a : b, every;
  if (m == 0) return;
  every = m / 4 < 1000 ? 1000 : m / 4;
  if (every > 5000) every = 5000;
  uv_timer_init(sv->core->loop, &sv->reaper);
  ludo__core_handle_opened(sv->core);
  sv->reaper.data = sv;
  uv_timer_start(&sv->reaper, on_reap, every, every);
  uv_unref((uv_handle_t *)&sv->reaper);
  sv->reaper_on = 1;
}

/* ---- requests --------------------------------------------------------- */

/* 1 (after saying why in err) when a token is set that no client could
 * send: empty (auth would be on with no secret: an unset variable behind
 * --token "$SECRET"), or with a byte that a header value cannot carry as
 * sent (spaces and tabs at its ends are trimmed by every HTTP stack, a
 * newline from a Secret's file ends the header): visible ASCII only. */
static int bad_token(const char *token, char *err, size_t errlen) {
  size_t i;
  if (token == NULL) return 0;
  if (token[0] == '\0') {
    snprintf(err, errlen, "the token is empty: give a secret, or none to "
             "serve without auth");
    return 1;
  }
  for (i = 0; token[i] != '\0'; i++) {
    unsigned char c = (unsigned char)token[i];
    if (c <= 0x20 || c >= 0x7f) {
      snprintf(err, errlen, "the token has %s at byte %zu: a client cannot "
               "send it in \"Authorization: Bearer <token>\"; use visible "
               "ASCII characters only (a trailing newline from a file? trim "
               "it)", c == ' ' ? "a space" : c == '\t' ? "a tab"
               : c == '\n' ? "a newline" : c == '\r' ? "a carriage return"
               : c < 0x20 || c == 0x7f ? "a control character"
               : "a non-ASCII byte", i + 1);
      return 1;
    }
  }
  return 0;
}

/* 1 when the n bytes at `given` are the secret (sn bytes), in a time
 * that depends on the secret's length only. */
static int same_secret(const char *given, size_t n, const char *secret,
                       size_t sn) {
  unsigned char d = (unsigned char)(n != sn);
  size_t i;
  for (i = 0; i < sn; i++)
    d |= (unsigned char)(given[n ? i % n : 0] ^ secret[i]);
  return d == 0;
}

static int authorized(ludo__serve_t *sv, ludo__http_req_t *req) {
  const char *h;
  if (sv->token == NULL) return 1;
  if (strcmp(ludo__http_req_path(req), "/health") == 0) return 1;
  h = ludo__http_req_header(req, "Authorization");
  if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0) return 0;
  h += 7;
  while (*h == ' ') h++;
  return same_secret(h, strlen(h), sv->token, strlen(sv->token));
}

/* The host of an origin ("https://h:port") or of a Host field ("h:port";
 * the first of a list), lowercased into buf, brackets kept ("[::1]");
 * "" when it does not fit. */
static void host_part(const char *s, char *buf, size_t n) {
  const char *p = strstr(s, "://"), *end;
  size_t len, i;
  if (p != NULL) s = p + 3;
  end = *s == '[' ? strchr(s, ']') : NULL;
  end = end ? end + 1 : s + strcspn(s, ":/, ");
  len = (size_t)(end - s);
  if (len >= n) len = 0;
  for (i = 0; i < len; i++) buf[i] = (char)tolower((unsigned char)s[i]);
  buf[len] = '\0';
}

static int loopback_name(const char *h) {
  return strcmp(h, "localhost") == 0 || strcmp(h, "127.0.0.1") == 0 ||
         strcmp(h, "[::1]") == 0;
}

/* 1 when the address listened on reaches loopback only: "localhost",
 * 127.0.0.0/8, ::1, or 127/8 mapped into IPv6 (::ffff:127.0.0.1), in
 * any of their spellings. */
static int loopback_host(const char *host) {
  static const unsigned char one[16] = {0, 0, 0, 0, 0, 0, 0, 0,
                                        0, 0, 0, 0, 0, 0, 0, 1};
  static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0,
                                           0, 0, 0, 0, 0xff, 0xff};
  unsigned char a[16];
  if (host == NULL) return 0;
  if (strcmp(host, "localhost") == 0) return 1;
  if (uv_inet_pton(AF_INET, host, a) == 0) return a[0] == 127;
  if (uv_inet_pton(AF_INET6, host, a) == 0)
    return memcmp(a, one, 16) == 0 ||
           (memcmp(a, mapped, 12) == 0 && a[12] == 127);
  return 0;
}

/* 1 when the request's host (Host, or X-Forwarded-Host from a proxy) is
 * the host named by `origin`. */
static int same_host(ludo__http_req_t *req, const char *origin) {
  static const char *const fields[] = {"Host", "X-Forwarded-Host"};
  char h[256];
  size_t i;
  for (i = 0; i < 2; i++) {
    const char *v = ludo__http_req_header(req, fields[i]);
    if (v == NULL) continue;
    host_part(v, h, sizeof h);
    if (h[0] != '\0' && strcmp(h, origin) == 0) return 1;
  }
  return 0;
}

/* MCP's transport rule against DNS rebinding: browsers name the page's
 * site in Origin, other clients send none. A page may call the server
 * when it comes from localhost or from the server's own host, but a
 * server listening on loopback only takes loopback pages: a rebound name
 * is the request's Host as well as its Origin. */
static int origin_ok(ludo__serve_t *sv, ludo__http_req_t *req) {
  const char *o = ludo__http_req_header(req, "Origin");
  char oh[256];
  if (o == NULL) return 1;
  host_part(o, oh, sizeof oh);
  if (loopback_name(oh)) return 1;
  return oh[0] != '\0' && !sv->loopback && same_host(req, oh);
}

static void on_request(void *ud, ludo__http_req_t *req) {
  ludo__serve_t *sv = ud;
  const char *path = ludo__http_req_path(req);
  size_t len;
  atomic_fetch_add(&sv->shared->metrics.http_requests, 1);
  if (sv->wm) atomic_fetch_add(&sv->wm->http_requests, 1);
  ludo__http_req_body(req, &len);
  atomic_fetch_add(&sv->shared->metrics.bytes_in, len);
  if (sv->closing) { /* a request after the stop: the drain is for those
                        before it */
    ludo__http_req_close_after(req);
    sv_respond_detail(sv, req, 503, SV_SHUTTING_DOWN);
    return;
  }
  if (strcmp(path, "/health") != 0 && !origin_ok(sv, req)) {
    sv_respond_detail(sv, req, 403, "Forbidden: requests from a page of "
                      "another site (Origin) are not accepted");
    return;
  }
  if (!authorized(sv, req)) { /* (sv_respond_json counts the 4xx) */
    static const ludo__http_header_t h[] = {
        {"WWW-Authenticate", "Bearer"}};
    sv_respond_json(sv, req, 401, "{\"detail\":\"Unauthorized\"}", 25, h,
                    1);
    return;
  }
  if (ludo__http_req_upgrade(req) &&
      strcmp(ludo__http_req_method(req), "GET") == 0 &&
      (strcmp(path, "/ws") == 0 || strcmp(path, "/mcp") == 0)) {
    sv_ws_accept(sv, req, path[1] == 'm');
    return;
  }
  sv_route(sv, req);
}

/* The HTTP layer answered a request itself (malformed, too big, too
 * slow): a request and an error for the metrics, as the routes' own. */
static void on_refused(void *ud, int status) {
  ludo__serve_t *sv = ud;
  atomic_fetch_add(&sv->shared->metrics.http_requests, 1);
  if (sv->wm) atomic_fetch_add(&sv->wm->http_requests, 1);
  ludo__metrics_proto(&sv->shared->metrics, status >= 500
                                                ? LUDO__MERR_HTTP_5XX
                                                : LUDO__MERR_HTTP_4XX);
}

/* A request the server held was dropped (its connection ended): the
 * session call it waits for answers nobody. */
static void on_abort(void *ud, ludo__http_req_t *req) {
  sv_sess_t *x = ludo__http_req_data(req);
  if (x != NULL && x->req == req) x->req = NULL;
  sv_mcp_abort(ud, req);
}

/* ---- the server ------------------------------------------------------- */

static void fill_options(ludo_server_options_t *o,
                         const ludo_server_options_t *in) {
  ludo__serve_options_init(o);
  if (in == NULL) return;
  *o = *in;
  if (o->http_session_timeout_ms == 0)
    o->http_session_timeout_ms = DEFAULT_HTTP_SESSION_TIMEOUT_MS;
  if (o->max_connections == 0) o->max_connections = DEFAULT_MAX_CONNECTIONS;
  if (o->drain_timeout_ms == 0)
    o->drain_timeout_ms = DEFAULT_DRAIN_TIMEOUT_MS;
  if (o->max_output_bytes == 0)
    o->max_output_bytes = DEFAULT_MAX_OUTPUT_BYTES;
}

void ludo__serve_options_init(ludo_server_options_t *o) {
  memset(o, 0, sizeof *o);
  o->http_session_timeout_ms = DEFAULT_HTTP_SESSION_TIMEOUT_MS;
  o->max_connections = DEFAULT_MAX_CONNECTIONS;
  o->drain_timeout_ms = DEFAULT_DRAIN_TIMEOUT_MS;
  o->max_output_bytes = DEFAULT_MAX_OUTPUT_BYTES;
}

int ludo__serve_new(ludo_env_t *env, const ludo_server_options_t *o,
                    ludo__serve_t **out, char *err, size_t errlen) {
  ludo_runtime_t *rt = env->rt;
  ludo__core_t *core = &rt->core;
  ludo__serve_t *sv;
  ludo__http_options_t ho;
  ludo__http_handler_t h = {on_request, on_abort, on_refused};
  json_error_t jerr;
  int rc;
  *out = NULL;
  err[0] = '\0';
  if (o != NULL && bad_token(o->token, err, errlen)) return LUDO_EINVAL;
  sv = ludo__calloc(&core->heap, sizeof *sv);
  if (sv == NULL) return LUDO_ENOMEM;
  sv->rt = rt;
  sv->env = env;
  sv->core = core;
  env->nservers++; /* ludo_env_free waits for the server */
  sv->closer.fn = serve_closer;
  ludo__core_add_closer(core, &sv->closer);
  ludo__buf_init(&sv->wrap, ludo__alloc_fn, &core->heap);
  fill_options(&sv->o, o);
  if (sv->o.token != NULL && sv->o.token[0] != '\0') {
    sv->token = ludo__strndup(&core->heap, sv->o.token,
                              strlen(sv->o.token));
    if (sv->token == NULL) goto nomem;
  }
  sv->o.token = NULL;
  sv->group = (ludo__serve_group_t *)sv->o.group;
  sv->worker = sv->o.worker;
  sv->o.group = NULL;
  ludo__serve_shared_init(&sv->own);
  sv->shared = sv->group ? sv_group_shared(sv->group) : &sv->own;
  if (sv->o.max_sessions == 0) /* the default */
    sv->o.max_sessions = env->concurrent ? DEFAULT_MAX_SESSIONS : 1;
  if (!env->concurrent && sv->o.max_sessions > 1) {
    snprintf(sv->errmsg, sizeof sv->errmsg, "environment %s is not "
             "concurrent (concurrent = false): it cannot serve %u sessions;"
             " use max sessions 1", env->label ? env->label : env->name,
             sv->o.max_sessions);
    sv->group = NULL;
    snprintf(err, errlen, "%s", sv->errmsg); /* sv goes next */
    ludo__serve_close(sv, NULL, NULL);
    return LUDO_EINVAL;
  }
  if (!env->concurrent && sv->group && sv_group_size(sv->group) > 1) {
    snprintf(sv->errmsg, sizeof sv->errmsg, "environment %s is not "
             "concurrent (concurrent = false): it cannot be served by %u "
             "workers; use one worker", env->label ? env->label : env->name,
             sv_group_size(sv->group));
    sv->group = NULL;
    snprintf(err, errlen, "%s", sv->errmsg); /* sv goes next */
    ludo__serve_close(sv, NULL, NULL);
    return LUDO_EINVAL;
  }
  if (sv->group && sv_fwd_start(sv) != 0) {
    sv->group = NULL;
    snprintf(err, errlen, "%s", sv->errmsg); /* sv goes next */
    ludo__serve_close(sv, NULL, NULL);
    return LUDO_EINVAL;
  }
  sv->info = json_loadb(env->info.p ? env->info.p : "{}", env->info.len, 0,
                        &jerr);
  if (sv->info == NULL) goto nomem;
  ludo__http_options_init(&ho);
  if (sv->o.max_message_bytes) ho.max_body_bytes = sv->o.max_message_bytes;
  if (sv->o.max_header_bytes) ho.max_header_bytes = sv->o.max_header_bytes;
  ho.max_connections = sv->o.max_connections;
  atomic_store_explicit(&sv->shared->output.max, sv->o.max_output_bytes,
                        memory_order_relaxed);
  /* One knob bounds what the server holds for clients either way: the
   * replies they do not read, and the messages they send ahead. */
  atomic_store_explicit(&sv->shared->input.max, sv->o.max_output_bytes,
                        memory_order_relaxed);
  ho.output_budget = &sv->shared->output;
  ludo__ws_options_init(&sv->wso);
  if (sv->o.max_message_bytes) sv->wso.max_message = sv->o.max_message_bytes;
  if (sv->o.ping_interval_ms == UINT32_MAX)
    sv->wso.ping_interval_ms = 0;
  else if (sv->o.ping_interval_ms)
    sv->wso.ping_interval_ms = sv->o.ping_interval_ms;
  if (sv->o.pong_timeout_ms) sv->wso.pong_timeout_ms = sv->o.pong_timeout_ms;
  rc = ludo__server_new(core, &ho, &h, sv, &sv->http);
  if (rc != 0) goto nomem;
  reaper_start(sv);
  *out = sv;
  return 0;
nomem:
  ludo__serve_close(sv, NULL, NULL);
  return LUDO_ENOMEM;
}

int ludo__serve_listen(ludo__serve_t *sv, const char *host, int port) {
  unsigned flags = 0;
  int rc;
  if (sv->rt->freeing || sv->closing) { /* a callback of the free */
    snprintf(sv->errmsg, sizeof sv->errmsg, "the server is closing");
    return LUDO_ECLOSED;
  }
  if (sv->o.reuseport || (sv->group && sv_group_size(sv->group) > 1))
    flags = LUDO__LISTEN_REUSEPORT;
  if (sv->group && sv_group_size(sv->group) > 1 && sv->worker == 0)
    flags |= LUDO__LISTEN_EXCLUSIVE;
  sv->loopback = loopback_host(host);
  rc = ludo__server_listen(sv->http, host, port, flags);
  if (rc != 0)
    snprintf(sv->errmsg, sizeof sv->errmsg, "%s",
             ludo__server_errmsg(sv->http));
  return rc;
}

int ludo__serve_port(const ludo__serve_t *sv) {
  return sv->http ? ludo__server_port(sv->http) : 0;
}

const char *ludo__serve_errmsg(const ludo__serve_t *sv) { return sv->errmsg; }

static void serve_free(ludo__serve_t *sv) {
  void (*cb)(void *) = sv->close_cb;
  void *ud = sv->close_ud;
  ludo__core_t *core = sv->core;
  ludo__core_remove_closer(core, &sv->closer);
  if (sv->env) sv->env->nservers--;
  if (sv->info) json_decref(sv->info);
  ludo__buf_free(&sv->wrap);
  if (sv->token) ludo__free(&core->heap, sv->token, strlen(sv->token) + 1);
  ludo__free(&core->heap, sv, sizeof *sv);
  if (cb) cb(ud);
}

/* Frees the server once its HTTP server, timer and sessions are gone. */
void sv_maybe_finish(ludo__serve_t *sv) {
  if (!sv->holding && sv->http_closed && sv->reaper_closed &&
      sv->sessions == NULL && sv->clients == NULL && sv->nproxies == 0 &&
      (!sv->inbox_on || sv->inbox_closed) &&
      (!sv->drain_on || sv->drain_closed))
    serve_free(sv);
}

static void on_http_closed(void *ud) {
  ludo__serve_t *sv = ud;
  sv->http_closed = 1;
  sv_maybe_finish(sv);
}

static void on_reaper_closed(uv_handle_t *h) {
  ludo__serve_t *sv = h->data;
  ludo__core_t *core = sv->core;
  sv->reaper_closed = 1;
  sv_maybe_finish(sv);            /* may free sv */
  ludo__core_handle_closed(core); /* last: the runtime may go with it */
}

/* ---- closing: drain, then close -------------------------------------- */

/* 1 when one of the server's own sessions has a call in flight, or a
 * call it passed to another worker waits for its answer (that worker
 * drains it too: the answer comes), or a JSON-RPC batch has members left
 * (mcp.c: they are answered, refused once the server is closing). */
static int any_busy(const ludo__serve_t *sv) {
  const sv_sess_t *x;
  const sv_ws_t *c;
  unsigned b;
  if (sv->batches != NULL) return 1;
  for (c = sv->clients; c; c = c->next)
    if (c->batch != NULL) return 1;
  for (x = sv->sessions; x; x = x->next)
    if (x->busy || (x->opening && !x->dead))
      return 1; /* an open is followed by its request's call */
  for (b = 0; sv->nproxies > 0 && b < SV_PROXY_BUCKETS; b++)
    for (x = sv->proxies[b]; x; x = x->hnext)
      if (x->busy && !x->dead) return 1;
  return 0;
}

static void on_drain_closed(uv_handle_t *h) {
  ludo__serve_t *sv = h->data;
  ludo__core_t *core = sv->core;
  sv->drain_closed = 1;
  sv_maybe_finish(sv);            /* may free sv */
  ludo__core_handle_closed(core); /* last: the runtime may go with it */
}

static void close_now(ludo__serve_t *sv);

/* Ends the drain: the calls finished, or its time is up (the calls still
 * running are then cancelled by the close). */
static void drain_end(ludo__serve_t *sv) {
  sv->draining = 0;
  uv_close((uv_handle_t *)&sv->drain, on_drain_closed);
  close_now(sv);
}

static void on_drain_timeout(uv_timer_t *t) { drain_end(t->data); }

/* Ends the drain from the loop (its timer, due now): this runs inside
 * the continuations of calls and proxies, which the close would free
 * under them. */
void sv_drain_check(ludo__serve_t *sv) {
  if (sv->draining && !any_busy(sv))
    uv_timer_start(&sv->drain, on_drain_timeout, 0, 0);
}

/* Stops accepting and waits (bounded) for the calls in flight; 0 when
 * there is nothing to wait for. */
static int drain_start(ludo__serve_t *sv) {
  if (sv->o.drain_timeout_ms == UINT32_MAX || sv->http == NULL ||
      !any_busy(sv))
    return 0;
  ludo__server_stop_accepting(sv->http);
  uv_timer_init(sv->core->loop, &sv->drain);
  ludo__core_handle_opened(sv->core);
  sv->drain.data = sv;
  uv_timer_start(&sv->drain, on_drain_timeout, sv->o.drain_timeout_ms, 0);
  sv->drain_on = 1;
  sv->draining = 1;
  return 1;
}

void ludo__serve_close(ludo__serve_t *sv, void (*cb)(void *ud), void *ud) {
  /* From a callback ludo_runtime_free runs: the free closes it. */
  if (sv == NULL || sv->closing || sv->rt->freeing) return;
  sv->closing = 1;
  sv->close_cb = cb;
  sv->close_ud = ud;
  if (!drain_start(sv)) close_now(sv);
}

/* Closes the WebSockets (1001), the sessions, the timers and the HTTP
 * server; the last close callback frees the server. */
static void close_now(ludo__serve_t *sv) {
  sv_sess_t *x, *next;
  sv_ws_close_all(sv);
  for (x = sv->sessions; x; x = next) {
    next = x->next;
    if (x->ws == NULL) sv_sess_close(x);
  }
  if (sv->inbox_on) sv_fwd_stop(sv);
  if (sv->reaper_on) {
    uv_close((uv_handle_t *)&sv->reaper, on_reaper_closed);
  } else {
    sv->reaper_closed = 1;
  }
  if (sv->http) {
    ludo__server_close(sv->http, on_http_closed, sv);
  } else {
    sv->http_closed = 1;
    sv_maybe_finish(sv);
  }
}

/* ludo_runtime_free, after every call's callback ran: the server closes
 * now, without a drain and without waiting for its peers (their
 * connections are dropped), and lets go of its environment and sessions,
 * which the free releases next. Its close callback runs here, while
 * everything is alive; its memory goes as its handles close (the
 * runtime's heap outlives them: ludo__core_handle_closed comes last in
 * their close callbacks). */
static void serve_closer(ludo__closer_t *cl) {
  ludo__serve_t *sv =
      (ludo__serve_t *)((char *)cl - offsetof(ludo__serve_t, closer));
  ludo__core_t *core = sv->core;
  void (*cb)(void *) = sv->close_cb;
  void *ud = sv->close_ud;
  sv_sess_t *x, *next;
  ludo__core_remove_closer(core, cl);
  sv->close_cb = NULL;
  sv->env->nservers--;
  sv->env = NULL;
  sv->holding = 1; /* nothing below frees sv */
  if (!sv->closing) {
    sv->closing = 1;
    close_now(sv);
  } else if (sv->draining) {
    drain_end(sv);
  }
  for (x = sv->sessions; x; x = next) { /* attached to a WebSocket too */
    next = x->next;
    sv_sess_close(x);
  }
  if (sv->http && !sv->http_closed) ludo__server_abort(sv->http);
  sv->holding = 0;
  sv_maybe_finish(sv); /* may free sv */
  if (cb == NULL) return;
  core->in_callback++;
  cb(ud);
  core->in_callback--;
}
