/* serve_watch.c - `ludo serve`'s stop watcher (serve_watch.h): signals,
 * the interrupts after the drain and the deadline, on a thread whose loop
 * runs no Lua. The workers' loops cannot time their own stop: a Lua call
 * that cannot yield (inside a table.sort comparator, say) holds its loop,
 * and the drain's timer and the deadline's with it, until its CPU budget
 * ends. */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/serve_watch.h"

/* How long after the drain's end the first interrupt comes (the workers'
 * own drain timers, when their loops are free, cancel the calls first),
 * and how often interrupts come after it. */
#define WATCH_GRACE_MS 500
#define WATCH_EVERY_MS 200

static void on_interrupts(uv_timer_t *t) {
  ludo__cli_watch_t *w = t->data;
  w->interrupt(w->ud);
}

static void on_deadline(uv_timer_t *t) {
  (void)t;
  fprintf(stderr, "ludo serve: connections did not close in time; "
          "exiting\n");
  _exit(0); /* the workers' threads still run: no atexit, no unwinding */
}

/* Stops the workers once and starts the clock on the stop. */
static void begin_stop(ludo__cli_watch_t *w) {
  uint64_t first = w->drain_ms + WATCH_GRACE_MS;
  if (w->stopping) return;
  w->stopping = 1;
  if (first + WATCH_GRACE_MS > w->deadline_ms)
    first = w->deadline_ms > WATCH_GRACE_MS
                ? w->deadline_ms - WATCH_GRACE_MS : 0;
  w->stop(w->ud);
  uv_timer_start(&w->interrupts, on_interrupts, first, WATCH_EVERY_MS);
  uv_timer_start(&w->deadline, on_deadline, w->deadline_ms, 0);
}

/* The handles stay open until the end: closing the last watcher of a
 * signal puts back its default action, and a second signal would then
 * kill the process in the middle of its stop. */
static void on_signal(uv_signal_t *h, int signum) {
  ludo__cli_watch_t *w = h->data;
  (void)signum;
  if (w->stopping) {
    fprintf(stderr, "ludo serve: already stopping\n");
    return;
  }
  fprintf(stderr, "ludo serve: stopping\n");
  begin_stop(w);
}

static void close_all(ludo__cli_watch_t *w) {
  uv_close((uv_handle_t *)&w->sigint, NULL);
  uv_close((uv_handle_t *)&w->sigterm, NULL);
  uv_close((uv_handle_t *)&w->wake, NULL);
  uv_close((uv_handle_t *)&w->interrupts, NULL);
  uv_close((uv_handle_t *)&w->deadline, NULL);
}

/* Blocks SIGINT and SIGTERM on the calling thread. */
static void block_signals(void) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
}

static void on_wake(uv_async_t *a) {
  ludo__cli_watch_t *w = a->data;
  if (atomic_load(&w->end_asked)) {
    block_signals(); /* closing puts back the default actions */
    close_all(w);
    return;
  }
  if (atomic_load(&w->stop_asked)) begin_stop(w);
}

static void *watch_main(void *arg) {
  ludo__cli_watch_t *w = arg;
  uv_run(&w->loop, UV_RUN_DEFAULT);
  return NULL;
}

int ludo__cli_watch_start(ludo__cli_watch_t *w) {
  if (uv_loop_init(&w->loop) != 0) {
    ludo__cli_error("cannot start the signal watcher's loop");
    return -1;
  }
  atomic_init(&w->stop_asked, 0);
  atomic_init(&w->end_asked, 0);
  w->stopping = 0;
  uv_async_init(&w->loop, &w->wake, on_wake);
  uv_signal_init(&w->loop, &w->sigint);
  uv_signal_init(&w->loop, &w->sigterm);
  uv_timer_init(&w->loop, &w->interrupts);
  uv_timer_init(&w->loop, &w->deadline);
  w->wake.data = w->sigint.data = w->sigterm.data = w;
  w->interrupts.data = w->deadline.data = w;
  uv_signal_start(&w->sigint, on_signal, SIGINT);
  uv_signal_start(&w->sigterm, on_signal, SIGTERM);
  if (pthread_create(&w->thread, NULL, watch_main, w) != 0) {
    ludo__cli_error("cannot start the signal watcher's thread");
    close_all(w);
    uv_run(&w->loop, UV_RUN_DEFAULT);
    uv_loop_close(&w->loop);
    return -1;
  }
  w->started = 1;
  return 0;
}

void ludo__cli_watch_stop(ludo__cli_watch_t *w) {
  atomic_store(&w->stop_asked, 1);
  uv_async_send(&w->wake);
}

void ludo__cli_watch_end(ludo__cli_watch_t *w) {
  if (!w->started) return;
  /* When the handles close libuv puts back the default actions: the
   * watcher and this thread block the signals first, then they are
   * ignored (which drops one that came meanwhile). */
  block_signals();
  atomic_store(&w->end_asked, 1);
  uv_async_send(&w->wake);
  pthread_join(w->thread, NULL);
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  w->started = 0;
  if (uv_loop_close(&w->loop) != 0)
    fprintf(stderr, "ludo serve: the signal watcher left handles open\n");
}
