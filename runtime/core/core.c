/* core.c - the core object and its run queue (see core.h). */
#include "core/core.h"

#include <malloc.h>
#include <pthread.h>
#include <string.h>

#include "base/clock.h"

/* Memory freed before returning it to the system. */
#define TRIM_AFTER ((size_t)4 << 20)

/* A queue pass this recent means someone runs the loop. */
#define LOOP_RECENT_NS 50000000u

static void run_queue(ludo__core_t *c);
static void on_check(uv_check_t *h);

/* The cores on hosts' loops: one per loop. A second runtime on a loop
 * would make blocking calls that run the loop (uv_run is not reentrant)
 * from inside the first's callbacks, where the first's re-entrancy rule
 * cannot see them; one runtime loads any number of environments. */
static pthread_mutex_t borrowers_lock = PTHREAD_MUTEX_INITIALIZER;
static ludo__core_t *borrowers;

/* Registers c, on the host's `loop`; 0, or LUDO_EBUSY when a runtime
 * runs on that loop already. */
static int claim_loop(ludo__core_t *c, uv_loop_t *loop) {
  ludo__core_t *o;
  int rc = 0;
  pthread_mutex_lock(&borrowers_lock);
  for (o = borrowers; o != NULL && rc == 0; o = o->next_borrower)
    if (o->loop == loop) rc = LUDO_EBUSY;
  if (rc == 0) {
    c->loop = loop;
    c->next_borrower = borrowers;
    borrowers = c;
  }
  pthread_mutex_unlock(&borrowers_lock);
  return rc;
}

static void release_loop(ludo__core_t *c) {
  ludo__core_t **p;
  pthread_mutex_lock(&borrowers_lock);
  for (p = &borrowers; *p != NULL; p = &(*p)->next_borrower)
    if (*p == c) {
      *p = c->next_borrower;
      break;
    }
  pthread_mutex_unlock(&borrowers_lock);
}

int ludo__core_init(ludo__core_t *c, ludo_alloc_fn alloc, void *alloc_ud,
                    ludo_log_cb log, void *log_ud, uv_loop_t *loop,
                    const char *module_path) {
  memset(c, 0, sizeof *c);
  ludo__alloc_init(&c->heap, alloc, alloc_ud);
  c->log.cb = log;
  c->log.ud = log_ud;
  if (module_path != NULL) {
    c->module_path = ludo__strndup(&c->heap, module_path,
                                   strlen(module_path));
    if (c->module_path == NULL) return LUDO_ENOMEM;
  }
  if (loop == NULL) {
    if (uv_loop_init(&c->own_loop) != 0) goto fail_path;
    c->loop = &c->own_loop;
  } else if (claim_loop(c, loop) != 0) {
    if (c->module_path)
      ludo__free(&c->heap, c->module_path, strlen(c->module_path) + 1);
    return LUDO_EBUSY;
  } else {
    c->borrowed = 1;
  }
  ludo__registry_init(&c->cmods, &c->heap);
  if (ludo__codecache_init(&c->cache, &c->heap, c->module_path) != 0)
    goto fail_loop;
  c->has_watchdog = ludo__watchdog_init(&c->watchdog) == 0;
  ludo__pages_init(&c->pages);
  /* failing, the pages map each region when it is needed */
  (void)ludo__prefault_init(&c->prefault, &c->pages);
  uv_idle_init(c->loop, &c->idle);
  c->idle.data = c;
  ludo__core_handle_opened(c);
  uv_check_init(c->loop, &c->check);
  c->check.data = c;
  ludo__core_handle_opened(c);
  return 0;
fail_loop:
  ludo__registry_free(&c->cmods);
  if (!c->borrowed) uv_loop_close(&c->own_loop);
  if (c->borrowed) release_loop(c);
fail_path:
  if (c->module_path)
    ludo__free(&c->heap, c->module_path, strlen(c->module_path) + 1);
  return LUDO_ENOMEM;
}

void ludo__core_handle_opened(ludo__core_t *c) { c->handles++; }

void ludo__core_handle_closed(ludo__core_t *c) {
  /* On an own loop, ludo__core_close finishes after uv_loop_close (the
   * loop lives inside what on_closed frees). */
  if (--c->handles == 0 && c->closing && c->borrowed && c->on_closed)
    c->on_closed(c);
}

static void handle_closed(uv_handle_t *h) {
  ludo__core_handle_closed(h->data);
}

void ludo__core_run_closers(ludo__core_t *c) {
  while (c->closers) { /* each unregisters itself */
    ludo__closer_t *cl = c->closers;
    cl->fn(cl);
    if (c->closers == cl) ludo__core_remove_closer(c, cl);
  }
}

void ludo__core_close(ludo__core_t *c) {
  ludo__core_run_closers(c);
  c->closing = 1;
  if (c->borrowed) release_loop(c); /* another runtime may take it now */
  c->ready.head = c->ready.tail = c->later.head = c->later.tail = NULL;
  c->held.head = c->held.tail = NULL;
  if (c->has_watchdog) ludo__watchdog_free(&c->watchdog);
  ludo__prefault_free(&c->prefault);
  ludo__codecache_free(&c->cache);
  ludo__registry_free(&c->cmods);
  if (c->module_path)
    ludo__free(&c->heap, c->module_path, strlen(c->module_path) + 1);
  c->module_path = NULL;
  uv_idle_stop(&c->idle);
  uv_check_stop(&c->check);
  uv_close((uv_handle_t *)&c->idle, handle_closed);
  uv_close((uv_handle_t *)&c->check, handle_closed);
  if (!c->borrowed) {
    uv_run(c->loop, UV_RUN_DEFAULT); /* every handle closes */
    uv_loop_close(c->loop);
    if (c->on_closed) c->on_closed(c); /* may free c */
  }
}

static void push(ludo__queue_t *q, ludo__task_t *t) {
  t->next = NULL;
  if (q->tail)
    q->tail->next = t;
  else
    q->head = t;
  q->tail = t;
}

static int remove_from(ludo__queue_t *q, ludo__task_t *t) {
  ludo__task_t *prev = NULL, *cur;
  for (cur = q->head; cur; prev = cur, cur = cur->next) {
    if (cur != t) continue;
    if (prev)
      prev->next = cur->next;
    else
      q->head = cur->next;
    if (q->tail == t) q->tail = prev;
    return 1;
  }
  return 0;
}

/* The idle handle's callback: nothing to do, its being active keeps the
 * loop's I/O poll from blocking while tasks wait for the check phase. */
static void on_idle(uv_idle_t *h) { (void)h; }

static void want_pass(ludo__core_t *c) {
  if (c->closing) return;
  uv_idle_start(&c->idle, on_idle); /* both no-ops if on */
  uv_check_start(&c->check, on_check);
}

static void stop_pass(ludo__core_t *c) {
  uv_idle_stop(&c->idle);
  uv_check_stop(&c->check);
}

void ludo__core_post(ludo__core_t *c, ludo__task_t *t) {
  if (t->queued || c->closing) return;
  t->queued = 1;
  /* A callback the pass runs (a completion) that starts the next call
   * waits for the next pass; a callback of the loop's I/O phase (a
   * socket's message) posts for the pass that follows it. */
  push(c->in_callback > 0 && c->in_pass ? &c->later : &c->ready, t);
  want_pass(c);
}

void ludo__core_post_later(ludo__core_t *c, ludo__task_t *t) {
  if (t->queued || c->closing) return;
  t->queued = 1;
  push(&c->later, t);
  want_pass(c);
}

/* A held delivery runs or is withdrawn: it no longer counts. */
static void unhold(ludo__core_t *c, ludo__task_t *t) {
  if (!t->held) return;
  t->held = 0;
  c->nheld--;
}

int ludo__core_held_pending(const ludo__core_t *c) { return c->nheld; }

void ludo__core_unpost(ludo__core_t *c, ludo__task_t *t) {
  unhold(c, t);
  if (!t->queued) return;
  if (!remove_from(&c->ready, t) && !remove_from(&c->later, t))
    remove_from(&c->held, t);
  t->queued = 0;
}

void ludo__core_post_delivery(ludo__core_t *c, ludo__task_t *t) {
  if (c->blocking == 0) {
    ludo__core_post(c, t);
    return;
  }
  if (t->queued || c->closing) return;
  t->queued = 1;
  t->held = 1;
  c->nheld++;
  push(&c->held, t);
}

void ludo__core_block(ludo__core_t *c) { c->blocking++; }

void ludo__core_unblock(ludo__core_t *c) {
  ludo__task_t *t;
  if (--c->blocking > 0) return;
  while ((t = c->held.head) != NULL) {
    c->held.head = t->next;
    if (c->held.head == NULL) c->held.tail = NULL;
    t->queued = 0;
    ludo__core_post(c, t);
  }
}

void ludo__core_add_closer(ludo__core_t *c, ludo__closer_t *cl) {
  cl->prev = NULL;
  cl->next = c->closers;
  if (c->closers) c->closers->prev = cl;
  c->closers = cl;
}

void ludo__core_remove_closer(ludo__core_t *c, ludo__closer_t *cl) {
  if (cl->prev)
    cl->prev->next = cl->next;
  else if (c->closers == cl)
    c->closers = cl->next;
  else
    return; /* not registered */
  if (cl->next) cl->next->prev = cl->prev;
  cl->next = cl->prev = NULL;
}

int ludo__core_loop_recent(const ludo__core_t *c) {
  return c->last_pass_ns != 0 &&
         ludo__clock_ns() - c->last_pass_ns <= LOOP_RECENT_NS;
}

int ludo__core_over(const ludo__core_t *c) {
  return c->deadline_ns != 0 && ludo__clock_ns() >= c->deadline_ns;
}

uint64_t ludo__core_slice_deadline(const ludo__core_t *c) {
  if (c->deadline_ns != 0) return c->deadline_ns;
  if (c->pass_end_ns != 0) return c->pass_end_ns;
  return c->slice_ns != 0 ? ludo__clock_ns() + c->slice_ns : 0;
}

/* Runs the ready tasks until none is left or the poll's deadline passed
 * (outside a poll, with a time slice: until the pass has run one slice,
 * so a host driving the loop with uv_run gets it back between slices of
 * a long Lua run), then makes the tasks posted from host callbacks ready
 * for the next pass. */
static void run_queue(ludo__core_t *c) {
  ludo__task_t *t;
  int was_in_pass = c->in_pass;
  c->in_pass = 1;
  c->last_pass_ns = ludo__clock_ns();
  c->pass_end_ns = c->deadline_ns == 0 && c->slice_ns != 0
                       ? c->last_pass_ns + c->slice_ns : 0;
  while ((t = c->ready.head) != NULL && !c->closing) {
    c->ready.head = t->next;
    if (c->ready.head == NULL) c->ready.tail = NULL;
    t->queued = 0;
    unhold(c, t);
    if (c->hint != NULL && c->ready.head != NULL)
      c->hint(c->ready.head, c->hint_ud);
    t->fn(t);
    if (ludo__core_over(c) ||
        (c->pass_end_ns != 0 && ludo__clock_ns() >= c->pass_end_ns))
      break;
  }
  c->pass_end_ns = 0;
  c->in_pass = was_in_pass;
  if (c->later.head != NULL) {
    if (c->ready.tail)
      c->ready.tail->next = c->later.head;
    else
      c->ready.head = c->later.head;
    c->ready.tail = c->later.tail;
    c->later.head = c->later.tail = NULL;
  }
  if (c->ready.head == NULL) stop_pass(c);
}

static void on_check(uv_check_t *h) { run_queue(h->data); }

void ludo__core_poll(ludo__core_t *c, uint64_t budget_ns) {
  uint64_t saved = c->deadline_ns;
  c->deadline_ns = budget_ns ? ludo__clock_ns() + budget_ns : 0;
  c->in_run++;
  if (c->borrowed) {
    /* The host runs its loop; a poll runs only ludo's queue. */
    if (uv_is_active((uv_handle_t *)&c->check)) run_queue(c);
  } else {
    uv_run(c->loop, UV_RUN_NOWAIT);
  }
  c->in_run--;
  c->deadline_ns = saved;
}

void ludo__core_run_once(ludo__core_t *c) {
  c->in_run++;
  uv_run(c->loop, UV_RUN_ONCE);
  c->in_run--;
}

void ludo__core_note_freed(ludo__core_t *c, size_t bytes) {
  c->trim_freed += bytes;
  if (c->trim_freed < TRIM_AFTER) return;
  c->trim_freed = 0;
  if (c->heap.fn == ludo__alloc_default) malloc_trim(0);
}
