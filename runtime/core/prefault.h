/* prefault.h - a thread that maps the arenas' next region of pages ahead.
 *
 * The first touch of a new 2 MiB region of arena chunks (base/pages.h) is
 * a page fault: the kernel zeroes a huge page, and on a virtual machine
 * the host may have to back it as well (3-4 ms on this project's machines,
 * against 0.1 ms for memory used before; docs/performance.md, "Session
 * 37"). A step that needs a chunk would wait for it. So when the pages
 * run low (ludo__pages_on_low), this thread maps and touches the next
 * region and offers it (ludo__pages_offer): the fault is paid on another
 * processor while the runtime's thread goes on. (A host that gives ludo
 * one processor pays it there all the same.)
 *
 * The thread starts on the first ask, so a runtime whose sessions fit in
 * half a region never has one; ludo__prefault_free joins it. */
#ifndef LUDO_CORE_PREFAULT_H
#define LUDO_CORE_PREFAULT_H

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>

#include "base/pages.h"

typedef struct ludo__prefault_s {
  pthread_t thread;
  sem_t wake;            /* one post per region asked for, one to stop */
  int ok;                /* `wake` is initialised */
  int started;           /* 1 running, -1 could not start, 0 not yet */
  _Atomic int stop;      /* set by ludo__prefault_free */
  ludo__pages_t *pages;
} ludo__prefault_t;

/* Has `pages` ask this thread for its next regions (sets its on_low).
 * Returns 0, or -1 when no semaphore could be made: then nothing is asked
 * ahead and pages maps its regions when it needs them, as without. */
int ludo__prefault_init(ludo__prefault_t *pf, ludo__pages_t *pages);

/* Stops the thread and joins it (it finishes a region it is mapping and
 * offers it: ludo__pages_free unmaps that). [never fails] */
void ludo__prefault_free(ludo__prefault_t *pf);

#endif
