/* curlm.c - libcurl's multi interface on a core's libuv loop (curlm.h).
 *
 * curl tells which sockets to watch for what (socket_cb) and when to wake
 * it for its timeouts (timer_cb); the loop tells curl what happened
 * (curl_multi_socket_action), then finished transfers are collected
 * (curl_multi_info_read) and their owners called. curl's callbacks only
 * start and stop handles: transfers are added and removed outside them.
 *
 * Sockets of connections curl opened (opensocket_cb) keep their poll
 * handle while the connection idles in curl's cache (socket_cb's
 * CURL_POLL_REMOVE): reusing the connection then needs no new handle nor
 * epoll registration. The handle of an idle socket stops at its first
 * event (the server closing it; curl checks the connection before reusing
 * it) and closes when curl closes the socket (closesocket_cb); while
 * idle it is unreferenced, so it keeps no host's uv_run going. Other
 * sockets have their handle closed at CURL_POLL_REMOVE, before curl
 * closes them. Easy handles are reused too (curl_easy_reset).
 *
 * Lanes: transfers run on several multi handles ("lanes") of at most
 * LANE transfers each, filled lowest first. curl 7.88's multi handle
 * walks its whole connection cache twice per transfer (looking for an
 * idle connection to reuse, then curl_multi_remove_handle's check of
 * connect-only connections): at 1,000 transfers in flight on one
 * multi handle that was about a third of the CPU of a request. A lane's
 * cache holds its own connections only, so a walk is at most about LANE
 * long; a call reuses the idle connections of the lowest lane with room,
 * which is where calls that just ended left theirs. Up to LANE requests
 * at once, everything runs on one multi handle as before. */
#include "net/curlm.h"

#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ludo_defs.h"

/* Transfers per lane (see above). */
#define LANE 64

/* A lane: one multi handle (with its own connection cache) and its
 * timer. Freed when its timer closed. */
typedef struct ludo__curlm_lane_s {
  ludo__curlm_t *m;
  CURLM *multi;
  uv_timer_t timer;
  size_t running, peak;        /* transfers on it now, at most */
} lane_t;

typedef struct sock_s {
  uv_poll_t poll;
  ludo__curlm_t *m;
  lane_t *lane;                /* whose multi handle watches it */
  curl_socket_t fd;
  int events;                  /* what the poll handle watches */
  int kept;                    /* curl opened it: kept while idle */
  int idle;                    /* curl does not watch it now */
  struct sock_s *next, *prev;
} sock_t;

struct ludo__curlm_s {
  ludo__core_t *core;
  lane_t **lanes;              /* lanes[0] made with the multi handle */
  size_t nlanes, lanes_cap;
  int down;                    /* the multi handles are cleaned up */
  ludo__closer_t closer;
  ludo__curlm_xfer_t *xfers;   /* running transfers */
  sock_t *socks;               /* sockets with a poll handle */
  sock_t **byfd;               /* the same, by descriptor */
  size_t nbyfd;
  CURL **idle;                 /* easy handles to reuse */
  size_t nidle, idle_cap;
  size_t running, peak;        /* transfers running now, at most */
  int open_handles;            /* our uv handles not yet closed */
  int closing;
  void *slot;                  /* see ludo__curlm_slot */
};

/* ---- curl_global_init, once ------------------------------------------- */

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_FAILED_INIT;

static void global_init(void) { global_rc = curl_global_init(CURL_GLOBAL_ALL); }

int ludo__curl_global(void) {
  pthread_once(&global_once, global_init);
  return global_rc == CURLE_OK ? 0 : LUDO_ENOMEM;
}

/* ---- handles ------------------------------------------------------------ */

static void free_if_done(ludo__curlm_t *m) {
  if (m->closing && m->open_handles == 0) {
    ludo__core_t *core = m->core;
    if (m->byfd) ludo__free(&core->heap, m->byfd, m->nbyfd * sizeof *m->byfd);
    if (m->idle)
      ludo__free(&core->heap, m->idle, m->idle_cap * sizeof *m->idle);
    if (m->lanes)
      ludo__free(&core->heap, m->lanes, m->lanes_cap * sizeof *m->lanes);
    ludo__free(&core->heap, m, sizeof *m);
  }
}

static sock_t *byfd_get(ludo__curlm_t *m, curl_socket_t fd) {
  return fd >= 0 && (size_t)fd < m->nbyfd ? m->byfd[fd] : NULL;
}

/* Records s under its descriptor. Returns 0 or -1 (out of memory). */
static int byfd_put(ludo__curlm_t *m, sock_t *s) {
  size_t n = m->nbyfd;
  if (s->fd < 0) return -1;
  if ((size_t)s->fd >= n) {
    size_t want = (size_t)s->fd + 1 > 2 * n ? (size_t)s->fd + 64 : 2 * n;
    sock_t **t = ludo__realloc(&m->core->heap, m->byfd, n * sizeof *t,
                               want * sizeof *t);
    if (t == NULL) return -1;
    memset(t + n, 0, (want - n) * sizeof *t);
    m->byfd = t;
    m->nbyfd = want;
  }
  m->byfd[s->fd] = s;
  return 0;
}

/* The core's count goes last: on a borrowed loop the core (the runtime
 * holding it) is freed when its last handle closes. */
static void handle_closed(ludo__curlm_t *m) {
  ludo__core_t *core = m->core;
  m->open_handles--;
  free_if_done(m);
  ludo__core_handle_closed(core);
}

static void sock_closed(uv_handle_t *h) {
  sock_t *s = h->data;
  ludo__curlm_t *m = s->m;
  ludo__free(&m->core->heap, s, sizeof *s);
  handle_closed(m);
}

static void timer_closed(uv_handle_t *h) {
  lane_t *l = h->data;
  ludo__curlm_t *m = l->m;
  ludo__free(&m->core->heap, l, sizeof *l);
  handle_closed(m);
}

/* Stops watching s and closes its handle (freed when closed). */
static void sock_drop(ludo__curlm_t *m, sock_t *s) {
  if (s->prev)
    s->prev->next = s->next;
  else
    m->socks = s->next;
  if (s->next) s->next->prev = s->prev;
  if (byfd_get(m, s->fd) == s) m->byfd[s->fd] = NULL;
  uv_poll_stop(&s->poll);
  uv_close((uv_handle_t *)&s->poll, sock_closed);
}

/* ---- finished transfers ------------------------------------------------ */

static void unlink_xfer(ludo__curlm_t *m, ludo__curlm_xfer_t *x) {
  m->running--;
  x->lane->running--;
  if (x->prev)
    x->prev->next = x->next;
  else
    m->xfers = x->next;
  if (x->next) x->next->prev = x->prev;
  x->next = x->prev = NULL;
}

/* Hands every finished transfer to its owner (possibly from the timer's
 * callback: curl reuses a connection and gets its whole reply at once). */
static void collect(lane_t *l) {
  ludo__curlm_t *m = l->m;
  CURLMsg *msg;
  int left;
  while ((msg = curl_multi_info_read(l->multi, &left)) != NULL) {
    ludo__curlm_xfer_t *x = NULL;
    CURLcode rc = msg->data.result;
    if (msg->msg != CURLMSG_DONE) continue;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
    curl_multi_remove_handle(l->multi, msg->easy_handle);
    if (x == NULL) continue;
    unlink_xfer(m, x);
    x->done(x->easy, rc, x->ud); /* may add or remove transfers */
  }
}

static void on_poll(uv_poll_t *h, int status, int events) {
  sock_t *s = h->data;
  lane_t *l = s->lane;
  int flags = 0, running;
  if (s->idle) { /* an idle connection's socket: curl will look at it */
    uv_poll_stop(&s->poll);
    s->events = 0;
    return;
  }
  if (status < 0) flags = CURL_CSELECT_ERR;
  if (events & UV_READABLE) flags |= CURL_CSELECT_IN;
  if (events & UV_WRITABLE) flags |= CURL_CSELECT_OUT;
  curl_multi_socket_action(l->multi, s->fd, flags, &running);
  collect(l);
}

static void on_timer(uv_timer_t *t) {
  lane_t *l = t->data;
  int running;
  curl_multi_socket_action(l->multi, CURL_SOCKET_TIMEOUT, 0, &running);
  collect(l);
}

/* ---- curl's callbacks --------------------------------------------------- */

static sock_t *sock_new(lane_t *l, curl_socket_t fd, int kept) {
  ludo__curlm_t *m = l->m;
  sock_t *s = ludo__calloc(&m->core->heap, sizeof *s);
  if (s == NULL) return NULL;
  s->fd = fd;
  if (byfd_put(m, s) != 0 ||
      uv_poll_init_socket(m->core->loop, &s->poll, fd) != 0) {
    if (byfd_get(m, fd) == s) m->byfd[fd] = NULL;
    ludo__free(&m->core->heap, s, sizeof *s);
    return NULL;
  }
  s->poll.data = s;
  s->m = m;
  s->lane = l;
  s->kept = kept;
  m->open_handles++;
  ludo__core_handle_opened(m->core);
  s->next = m->socks;
  if (m->socks) m->socks->prev = s;
  m->socks = s;
  return s;
}

static curl_socket_t opensocket_cb(void *clientp, curlsocktype purpose,
                                   struct curl_sockaddr *a) {
  lane_t *l = clientp;
  curl_socket_t fd = socket(a->family, a->socktype | SOCK_CLOEXEC,
                            a->protocol);
  (void)purpose;
  if (fd >= 0 && byfd_get(l->m, fd) == NULL) sock_new(l, fd, 1);
  return fd < 0 ? CURL_SOCKET_BAD : fd;
}

static int closesocket_cb(void *clientp, curl_socket_t fd) {
  ludo__curlm_t *m = ((lane_t *)clientp)->m;
  sock_t *s = byfd_get(m, fd);
  if (s != NULL) sock_drop(m, s); /* before the descriptor goes */
  return close(fd);
}

static int socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp,
                     void *socketp) {
  lane_t *l = userp;
  ludo__curlm_t *m = l->m;
  sock_t *s = socketp;
  int events = 0;
  (void)easy;
  if (s == NULL) s = byfd_get(m, fd);
  if (what == CURL_POLL_REMOVE) {
    if (s == NULL) return 0;
    curl_multi_assign(l->multi, fd, NULL);
    if (s->kept) { /* stops at its next event, or is used again */
      s->idle = 1;
      uv_unref((uv_handle_t *)&s->poll); /* keeps no uv_run going */
    } else
      sock_drop(m, s);
    return 0;
  }
  if (s == NULL && (s = sock_new(l, fd, 0)) == NULL) return -1;
  s->lane = l;
  if (s->idle || socketp == NULL) curl_multi_assign(l->multi, fd, s);
  if (s->idle) uv_ref((uv_handle_t *)&s->poll);
  s->idle = 0;
  if (what & CURL_POLL_IN) events |= UV_READABLE;
  if (what & CURL_POLL_OUT) events |= UV_WRITABLE;
  if (events != s->events) uv_poll_start(&s->poll, events, on_poll);
  s->events = events;
  return 0;
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp) {
  lane_t *l = userp;
  (void)multi;
  if (timeout_ms < 0)
    uv_timer_stop(&l->timer);
  else
    uv_timer_start(&l->timer, on_timer, (uint64_t)timeout_ms, 0);
  return 0;
}

/* ---- life --------------------------------------------------------------- */

/* The core closes: running transfers end (aborted), curl lets its sockets
 * go, our handles close and the last close frees m. */
static void closer_fn(ludo__closer_t *cl) {
  ludo__curlm_t *m = (ludo__curlm_t *)((char *)cl -
                                       offsetof(ludo__curlm_t, closer));
  size_t i;
  ludo__core_remove_closer(m->core, cl);
  while (m->xfers != NULL) {
    ludo__curlm_xfer_t *x = m->xfers;
    curl_multi_remove_handle(x->lane->multi, x->easy);
    unlink_xfer(m, x);
    x->done(x->easy, CURLE_ABORTED_BY_CALLBACK, x->ud);
  }
  while (m->nidle > 0) curl_easy_cleanup(m->idle[--m->nidle]);
  for (i = 0; i < m->nlanes; i++) { /* closes the sockets: closesocket_cb */
    curl_multi_cleanup(m->lanes[i]->multi);
    m->lanes[i]->multi = NULL;
  }
  m->down = 1;
  while (m->socks != NULL) sock_drop(m, m->socks);
  m->core->curlm = NULL;
  m->closing = 1;
  for (i = 0; i < m->nlanes; i++) {
    uv_timer_stop(&m->lanes[i]->timer);
    uv_close((uv_handle_t *)&m->lanes[i]->timer, timer_closed);
  }
}

/* A new lane, at the end of m->lanes; NULL when out of memory. */
static lane_t *lane_new(ludo__curlm_t *m) {
  ludo__alloc_t *heap = &m->core->heap;
  lane_t *l;
  if (m->nlanes == m->lanes_cap) {
    size_t want = m->lanes_cap ? 2 * m->lanes_cap : 4;
    lane_t **t = ludo__realloc(heap, m->lanes, m->lanes_cap * sizeof *t,
                               want * sizeof *t);
    if (t == NULL) return NULL;
    m->lanes = t;
    m->lanes_cap = want;
  }
  if ((l = ludo__calloc(heap, sizeof *l)) == NULL) return NULL;
  if ((l->multi = curl_multi_init()) == NULL) {
    ludo__free(heap, l, sizeof *l);
    return NULL;
  }
  l->m = m;
  curl_multi_setopt(l->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
  curl_multi_setopt(l->multi, CURLMOPT_SOCKETDATA, l);
  curl_multi_setopt(l->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
  curl_multi_setopt(l->multi, CURLMOPT_TIMERDATA, l);
  uv_timer_init(m->core->loop, &l->timer);
  l->timer.data = l;
  m->open_handles++;
  ludo__core_handle_opened(m->core);
  m->lanes[m->nlanes++] = l;
  return l;
}

static int curlm_new(ludo__core_t *core, ludo__curlm_t **out) {
  ludo__curlm_t *m;
  if (ludo__curl_global() != 0) return LUDO_ENOMEM;
  m = ludo__calloc(&core->heap, sizeof *m);
  if (m == NULL) return LUDO_ENOMEM;
  m->core = core;
  if (lane_new(m) == NULL) {
    if (m->lanes) ludo__free(&core->heap, m->lanes,
                             m->lanes_cap * sizeof *m->lanes);
    ludo__free(&core->heap, m, sizeof *m);
    return LUDO_ENOMEM;
  }
  m->closer.fn = closer_fn;
  ludo__core_add_closer(core, &m->closer);
  *out = m;
  return 0;
}

int ludo__curlm_get(ludo__core_t *core, ludo__curlm_t **out) {
  int rc = 0;
  *out = NULL;
  if (core->closing) return LUDO_ECLOSED;
  if (core->curlm == NULL) rc = curlm_new(core, &core->curlm);
  *out = core->curlm;
  return rc;
}

CURL *ludo__curlm_easy(ludo__curlm_t *m) {
  return m->nidle > 0 ? m->idle[--m->nidle] : curl_easy_init();
}

/* Room in the pool for one more handle: it keeps as many as the most
 * transfers that ran at once. A smaller pool, under a thousand requests
 * finishing before their sessions start the next ones, freed handles
 * that curl_easy_init made again a moment later (with curl's 16 KiB
 * buffer each time). */
static int idle_room(ludo__curlm_t *m) {
  size_t want;
  CURL **t;
  if (m->down || m->nidle >= m->peak) return 0;
  if (m->nidle < m->idle_cap) return 1;
  want = m->idle_cap ? 2 * m->idle_cap : 16;
  if (want > m->peak) want = m->peak;
  t = ludo__realloc(&m->core->heap, m->idle, m->idle_cap * sizeof *t,
                    want * sizeof *t);
  if (t == NULL) return 0;
  m->idle = t;
  m->idle_cap = want;
  return 1;
}

void ludo__curlm_easy_release(ludo__curlm_t *m, CURL *easy) {
  if (idle_room(m)) {
    curl_easy_reset(easy);
    m->idle[m->nidle++] = easy;
  } else {
    curl_easy_cleanup(easy);
  }
}

/* The lowest lane with room, a new one when all are full (lane 0, over
 * its size, when out of memory). */
static lane_t *lane_for(ludo__curlm_t *m) {
  size_t i;
  lane_t *l;
  for (i = 0; i < m->nlanes; i++)
    if (m->lanes[i]->running < LANE) return m->lanes[i];
  return (l = lane_new(m)) != NULL ? l : m->lanes[0];
}

int ludo__curlm_add(ludo__curlm_t *m, ludo__curlm_xfer_t *x,
                    ludo__curlm_done_fn done, void *ud) {
  lane_t *l = lane_for(m);
  x->done = done;
  x->ud = ud;
  curl_easy_setopt(x->easy, CURLOPT_PRIVATE, (char *)x);
  curl_easy_setopt(x->easy, CURLOPT_OPENSOCKETFUNCTION, opensocket_cb);
  curl_easy_setopt(x->easy, CURLOPT_OPENSOCKETDATA, l);
  curl_easy_setopt(x->easy, CURLOPT_CLOSESOCKETFUNCTION, closesocket_cb);
  curl_easy_setopt(x->easy, CURLOPT_CLOSESOCKETDATA, l);
  if (curl_multi_add_handle(l->multi, x->easy) != CURLM_OK)
    return LUDO_ENOMEM;
  x->lane = l;
  if (++l->running > l->peak) { /* curl's default closed connections
                                   mid-run: 4 x handles in the multi */
    l->peak = l->running;
    curl_multi_setopt(l->multi, CURLMOPT_MAXCONNECTS, (long)l->peak);
  }
  if (++m->running > m->peak) m->peak = m->running;
  x->prev = NULL;
  x->next = m->xfers;
  if (m->xfers) m->xfers->prev = x;
  m->xfers = x;
  return 0;
}

void ludo__curlm_remove(ludo__curlm_t *m, ludo__curlm_xfer_t *x) {
  curl_multi_remove_handle(x->lane->multi, x->easy);
  unlink_xfer(m, x);
}

void **ludo__curlm_slot(ludo__curlm_t *m) { return &m->slot; }

ludo__core_t *ludo__curlm_core(ludo__curlm_t *m) { return m->core; }
