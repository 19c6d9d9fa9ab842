/* watchdog.c - CPU budgets and time slices by signal (see watchdog.h). */
#include "core/watchdog.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"

/* The innermost entry running on this thread. */
static _Thread_local ludo__wd_entry_t *tl_top;

/* The longest the thread sleeps, and the shortest. */
#define MAX_SLEEP_NS 50000000u
#define MIN_SLEEP_NS 100000u

static int expired(uint64_t deadline, uint64_t now) {
  return deadline != 0 && now >= deadline;
}

/* Interrupts every entry whose budget ended, with all entries inside it,
 * and the innermost entry when its slice ended. */
static void on_sigurg(int sig) {
  int saved = errno;
  uint64_t now = ludo__clock_ns();
  ludo__wd_entry_t *e, *last_killed = NULL;
  (void)sig;
  for (e = tl_top; e != NULL; e = e->outer) {
    e->interrupt(e->arg, LUDO__WD_CANCEL); /* a no-op unless asked */
    if (expired(e->budget_ns, now)) last_killed = e;
  }
  if (last_killed != NULL) {
    for (e = tl_top; e != NULL; e = e->outer) {
      e->interrupt(e->arg, expired(e->budget_ns, now) ? LUDO__WD_KILL
                                                      : LUDO__WD_KILL_OUTER);
      if (e == last_killed) break;
    }
  } else if (tl_top != NULL && expired(tl_top->slice_ns, now)) {
    tl_top->interrupt(tl_top->arg, LUDO__WD_SLICE);
  }
  errno = saved;
}

static int install_handler(void) {
  struct sigaction old, sa;
  if (sigaction(SIGURG, NULL, &old) != 0) return -1;
  if (old.sa_handler == on_sigurg) return 0;
  if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN) return -1;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigurg;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  return sigaction(SIGURG, &sa, NULL) == 0 ? 0 : -1;
}

int ludo__watchdog_init(ludo__watchdog_t *w) {
  int i;
  memset(w, 0, sizeof *w);
  atomic_init(&w->depth, 0);
  atomic_init(&w->next_wake, UINT64_MAX);
  atomic_init(&w->cancel_gen, 0);
  for (i = 0; i < LUDO__WD_DEPTH; i++) atomic_init(&w->deadline[i], 0);
  w->target = pthread_self();
  w->max_sleep_ns = MAX_SLEEP_NS;
  if (install_handler() != 0) return -1;
  if (sem_init(&w->wake, 0, 0) != 0) return -1;
  w->ok = 1;
  return 0;
}

/* The earliest deadline of the active entries (0: none). */
static uint64_t earliest(ludo__watchdog_t *w) {
  int i, n = atomic_load(&w->depth);
  uint64_t best = 0;
  if (n > LUDO__WD_DEPTH) n = LUDO__WD_DEPTH;
  for (i = 0; i < n; i++) {
    uint64_t d = atomic_load(&w->deadline[i]);
    if (d != 0 && (best == 0 || d < best)) best = d;
  }
  return best;
}

static void *watch(void *arg) {
  ludo__watchdog_t *w = arg;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL); /* never run host handlers */
  while (!atomic_load(&w->stop)) {
    uint64_t now = ludo__clock_ns(), d = earliest(w), until;
    struct timespec ts;
    if (d != 0 && now >= d) {
      pthread_kill(w->target, SIGURG);
      d = now + MIN_SLEEP_NS * 5; /* check again soon: it may not stop */
    }
    until = d == 0 || d > now + w->max_sleep_ns ? now + w->max_sleep_ns : d;
    if (until < now + MIN_SLEEP_NS) until = now + MIN_SLEEP_NS;
    atomic_store(&w->next_wake, until);
    ts.tv_sec = (time_t)(until / 1000000000u);
    ts.tv_nsec = (long)(until % 1000000000u);
    while (sem_clockwait(&w->wake, CLOCK_MONOTONIC, &ts) != 0 &&
           errno == EINTR) {
    }
  }
  return NULL;
}

int ludo__watchdog_enter(ludo__watchdog_t *w, ludo__wd_entry_t *e) {
  int slot = atomic_load(&w->depth);
  uint64_t d = e->budget_ns;
  if (slot >= LUDO__WD_DEPTH) return -1;
  if (e->slice_ns != 0 && (d == 0 || e->slice_ns < d)) d = e->slice_ns;
  if (!w->started)
    w->started = pthread_create(&w->thread, NULL, watch, w) == 0 ? 1 : -1;
  e->w = w;
  e->slot = slot;
  e->outer = tl_top;
  atomic_store(&w->deadline[slot], d);
  atomic_store(&w->depth, slot + 1);
  tl_top = e;
  /* Wake the thread only when it would sleep past this deadline. */
  if (d != 0 && d < atomic_load(&w->next_wake)) {
    atomic_store(&w->next_wake, d);
    sem_post(&w->wake);
  }
  return 0;
}

void ludo__watchdog_leave(ludo__wd_entry_t *e) {
  ludo__watchdog_t *w = e->w;
  tl_top = e->outer;
  atomic_store(&w->deadline[e->slot], 0);
  atomic_store(&w->depth, e->slot);
}

void ludo__watchdog_set_slice(ludo__watchdog_t *w, uint64_t slice_ns) {
  if (slice_ns >= MIN_SLEEP_NS * 10 && slice_ns < MAX_SLEEP_NS)
    w->max_sleep_ns = slice_ns / 2;
}

void ludo__watchdog_cancel(ludo__watchdog_t *w) {
  int saved = errno;
  atomic_fetch_add(&w->cancel_gen, 1);
  if (w->ok) pthread_kill(w->target, SIGURG);
  errno = saved;
}

void ludo__watchdog_free(ludo__watchdog_t *w) {
  if (w->started == 1) {
    atomic_store(&w->stop, 1);
    sem_post(&w->wake);
    pthread_join(w->thread, NULL);
  }
  w->started = 0;
  if (w->ok) sem_destroy(&w->wake);
  w->ok = 0;
}
