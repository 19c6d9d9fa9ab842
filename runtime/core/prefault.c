/* prefault.c - the arenas' next region mapped ahead (see prefault.h). */
#include "core/prefault.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

static void *run(void *arg) {
  ludo__prefault_t *pf = arg;
  for (;;) {
    ludo__pages_region_t *r;
    while (sem_wait(&pf->wake) != 0 && errno == EINTR) {
    }
    if (atomic_load(&pf->stop)) break;
    if ((r = ludo__pages_map()) != NULL) ludo__pages_offer(pf->pages, r);
  }
  return NULL;
}

/* The pages' on_low, on the runtime's thread. A thread that cannot start
 * leaves the ask unanswered: pages asks no more and maps its regions
 * itself. */
static void ask(void *ud) {
  ludo__prefault_t *pf = ud;
  if (pf->started == 0) {
    /* The thread starts with every signal blocked (it inherits the mask
     * it is created under), so it never runs a host's handler, not even
     * before its first instruction. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pf->started = pthread_create(&pf->thread, NULL, run, pf) == 0 ? 1 : -1;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
  }
  if (pf->started == 1) sem_post(&pf->wake);
}

int ludo__prefault_init(ludo__prefault_t *pf, ludo__pages_t *pages) {
  memset(pf, 0, sizeof *pf);
  atomic_init(&pf->stop, 0);
  pf->pages = pages;
  if (sem_init(&pf->wake, 0, 0) != 0) return -1;
  pf->ok = 1;
  ludo__pages_on_low(pages, ask, pf);
  return 0;
}

void ludo__prefault_free(ludo__prefault_t *pf) {
  if (pf->started == 1) {
    atomic_store(&pf->stop, 1);
    sem_post(&pf->wake);
    pthread_join(pf->thread, NULL);
  }
  pf->started = 0;
  if (pf->ok) {
    ludo__pages_on_low(pf->pages, NULL, NULL);
    sem_destroy(&pf->wake);
  }
  pf->ok = 0;
}
