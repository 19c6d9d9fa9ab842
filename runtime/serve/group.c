/* group.c - a group of servers, one per worker thread (serve.h): the
 * session count and metrics they share, and each worker's inbox, a queue
 * of messages from the other workers guarded by a mutex, whose arrival
 * wakes the owner's loop through its uv_async_t.
 *
 * This is the only state of runtime/serve that several threads touch: the
 * count and metrics are C11 atomics; an inbox's queue and its async
 * pointer are read and written under the inbox's mutex. A sender wakes the
 * owner while it holds the mutex, and the owner clears the pointer under
 * it before closing the handle, so no uv_async_send reaches a closing
 * handle. Messages and the group itself use the C library's allocator
 * (ludo__alloc_default): a runtime's heap keeps counts for one thread. */
#include "serve/internal.h"

#include <pthread.h>
#include <string.h>

typedef struct inbox_s {
  pthread_mutex_t mu;
  uv_async_t *async;         /* the owner's, while it takes messages */
  int taken;                 /* a server holds this worker index */
  sv_fwd_t *head, *tail;
} inbox_t;

struct ludo__serve_group_s {
  ludo__serve_shared_t shared;
  unsigned n;
  inbox_t *inbox;            /* n of them */
  ludo__worker_metrics_t *workers; /* n of them */
};

static void *sys_alloc(size_t n) {
  return ludo__alloc_default(NULL, NULL, 0, n);
}

static void sys_free(void *p, size_t n) {
  if (p) ludo__alloc_default(NULL, p, n, 0);
}

int ludo__serve_group_new(unsigned n, ludo__serve_group_t **out) {
  ludo__serve_group_t *g;
  unsigned i;
  *out = NULL;
  if (n == 0 || n > LUDO_SERVER_MAX_WORKERS) return LUDO_EINVAL;
  g = sys_alloc(sizeof *g);
  if (g == NULL) return LUDO_ENOMEM;
  memset(g, 0, sizeof *g);
  g->inbox = sys_alloc(n * sizeof *g->inbox);
  g->workers = sys_alloc(n * sizeof *g->workers);
  if (g->inbox == NULL || g->workers == NULL) {
    sys_free(g->inbox, n * sizeof *g->inbox);
    sys_free(g->workers, n * sizeof *g->workers);
    sys_free(g, sizeof *g);
    return LUDO_ENOMEM;
  }
  g->n = n;
  ludo__serve_shared_init(&g->shared);
  for (i = 0; i < n; i++) {
    memset(&g->inbox[i], 0, sizeof g->inbox[i]);
    pthread_mutex_init(&g->inbox[i].mu, NULL);
    atomic_init(&g->workers[i].sessions_open, 0);
    atomic_init(&g->workers[i].http_requests, 0);
    atomic_init(&g->workers[i].forwarded, 0);
  }
  g->shared.metrics.workers = g->workers;
  g->shared.metrics.nworkers = n;
  *out = g;
  return 0;
}

void ludo__serve_group_free(ludo__serve_group_t *g) {
  unsigned i;
  if (g == NULL) return;
  for (i = 0; i < g->n; i++) {
    sv_fwd_t *m = g->inbox[i].head, *next;
    for (; m; m = next) {
      next = m->next;
      sv_fwd_free(m);
    }
    pthread_mutex_destroy(&g->inbox[i].mu);
  }
  sys_free(g->inbox, g->n * sizeof *g->inbox);
  sys_free(g->workers, g->n * sizeof *g->workers);
  sys_free(g, sizeof *g);
}

unsigned sv_group_size(const ludo__serve_group_t *g) { return g->n; }

ludo__serve_shared_t *sv_group_shared(ludo__serve_group_t *g) {
  return &g->shared;
}

/* ---- messages ---------------------------------------------------------- */

sv_fwd_t *sv_fwd_new(const char *data, size_t len) {
  sv_fwd_t *m = sys_alloc(sizeof *m + len + 1);
  if (m == NULL) return NULL;
  memset(m, 0, sizeof *m);
  if (len) memcpy(m->data, data, len);
  m->data[len] = '\0';
  m->len = len;
  return m;
}

void sv_fwd_free(sv_fwd_t *m) {
  if (m) sys_free(m, sizeof *m + m->len + 1);
}

/* ---- inboxes ------------------------------------------------------------ */

int sv_group_join(ludo__serve_group_t *g, unsigned worker, uv_async_t *a) {
  inbox_t *in;
  int rc = 0;
  if (worker >= g->n) return LUDO_EINVAL;
  in = &g->inbox[worker];
  pthread_mutex_lock(&in->mu);
  if (in->taken) {
    rc = LUDO_EINVAL;
  } else {
    in->taken = 1;
    in->async = a;
  }
  pthread_mutex_unlock(&in->mu);
  return rc;
}

int sv_group_post(ludo__serve_group_t *g, unsigned to, sv_fwd_t *m) {
  inbox_t *in;
  int rc = 0;
  if (to >= g->n) return LUDO_ECLOSED;
  in = &g->inbox[to];
  m->next = NULL;
  pthread_mutex_lock(&in->mu);
  if (in->async == NULL) {
    rc = LUDO_ECLOSED;
  } else {
    if (in->tail)
      in->tail->next = m;
    else
      in->head = m;
    in->tail = m;
    uv_async_send(in->async);
  }
  pthread_mutex_unlock(&in->mu);
  return rc;
}

sv_fwd_t *sv_group_take(ludo__serve_group_t *g, unsigned worker) {
  inbox_t *in = &g->inbox[worker];
  sv_fwd_t *m;
  pthread_mutex_lock(&in->mu);
  m = in->head;
  in->head = in->tail = NULL;
  pthread_mutex_unlock(&in->mu);
  return m;
}

sv_fwd_t *sv_group_leave(ludo__serve_group_t *g, unsigned worker) {
  inbox_t *in = &g->inbox[worker];
  sv_fwd_t *m;
  pthread_mutex_lock(&in->mu);
  m = in->head;
  in->head = in->tail = NULL;
  in->async = NULL;
  in->taken = 0;
  pthread_mutex_unlock(&in->mu);
  return m;
}
