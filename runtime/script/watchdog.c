/* watchdog.c - CPU budgets by signal (see watchdog.h). */
#include "script/watchdog.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "script/state.h"

/* The state whose call runs on this thread (set while Lua runs). */
static _Thread_local struct ludo__state_s *tl_running;

static void on_sigurg(int sig) {
  int saved = errno;
  (void)sig;
  if (tl_running != NULL) ludo__state_interrupt(tl_running);
  errno = saved;
}

static int install_handler(void) {
  static int ok;
  struct sigaction old;
  if (sigaction(SIGURG, NULL, &old) != 0) return -1;
  if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN &&
      old.sa_handler != on_sigurg)
    return -1;
  {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigurg;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    ok = sigaction(SIGURG, &sa, NULL) == 0;
  }
  return ok ? 0 : -1;
}

int ludo__watchdog_init(ludo__watchdog_t *w) {
  memset(w, 0, sizeof *w);
  atomic_init(&w->current, NULL);
  atomic_init(&w->deadline_ns, 0);
  atomic_init(&w->period_ns, 50000000u);
  w->target = pthread_self();
  if (install_handler() != 0) return -1;
  if (pthread_mutex_init(&w->mu, NULL) != 0) return -1;
  if (pthread_cond_init(&w->cv, NULL) != 0) {
    pthread_mutex_destroy(&w->mu);
    return -1;
  }
  return 0;
}

static void *watch(void *arg) {
  ludo__watchdog_t *w = arg;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL); /* never run host handlers */
  pthread_mutex_lock(&w->mu);
  while (!w->stop) {
    struct timespec ts;
    uint64_t period = atomic_load(&w->period_ns);
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)(period % 1000000000u);
    ts.tv_sec += (time_t)(period / 1000000000u) + ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(&w->cv, &w->mu, &ts);
    if (w->stop) break;
    if (atomic_load(&w->current) != NULL &&
        ludo__clock_coarse_ns() > atomic_load(&w->deadline_ns))
      pthread_kill(w->target, SIGURG);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

void ludo__watchdog_enter(ludo__watchdog_t *w, struct ludo__state_s *st,
                          uint64_t deadline_ns, uint64_t budget_ns) {
  uint64_t period = budget_ns / 4;
  if (period > 50000000u) period = 50000000u;
  if (period < 1000000u) period = 1000000u;
  if (period < atomic_load(&w->period_ns))
    atomic_store(&w->period_ns, period);
  if (!w->started) {
    w->started = pthread_create(&w->thread, NULL, watch, w) == 0 ? 1 : -1;
  }
  atomic_store(&w->deadline_ns, deadline_ns);
  tl_running = st;
  atomic_store(&w->current, st);
}

void ludo__watchdog_leave(ludo__watchdog_t *w) {
  atomic_store(&w->current, NULL);
  tl_running = NULL;
}

void ludo__watchdog_free(ludo__watchdog_t *w) {
  if (w->started == 1) {
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
  }
  w->started = 0;
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
}
