/* pages.c - 4 KiB pages from 2 MiB regions (see pages.h). */
#include "base/pages.h"

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "base/sanitize.h"

#if LUDO__ASAN
/* LeakSanitizer scans the regions for pointers, as it scans the heap:
 * a state's heap blocks are reachable from its chunks only. */
#include <sanitizer/lsan_interface.h>
#define ROOT_ADD(p) __lsan_register_root_region((p), LUDO__PAGES_REGION)
#define ROOT_DEL(p) __lsan_unregister_root_region((p), LUDO__PAGES_REGION)
#else
#define ROOT_ADD(p) ((void)(p))
#define ROOT_DEL(p) ((void)(p))
#endif

#define PAGES_PER_REGION ((unsigned)(LUDO__PAGES_REGION / LUDO__PAGE))

/* The record in a region's first page. */
struct ludo__pages_region_s {
  ludo__pages_region_t *next, *prev; /* in pg->open while it has pages
                                        left and is not the spare */
  void *given_back;                  /* pages back, linked by first word */
  unsigned used;                     /* pages handed out */
  unsigned fresh;                    /* index of the first never-used page */
};

static ludo__pages_region_t *region_of(const void *page) {
  return (ludo__pages_region_t *)((uintptr_t)page &
                                  ~(uintptr_t)(LUDO__PAGES_REGION - 1));
}

static int has_pages(const ludo__pages_region_t *r) {
  return r->given_back != NULL || r->fresh < PAGES_PER_REGION;
}

static void link_open(ludo__pages_t *pg, ludo__pages_region_t *r) {
  r->prev = NULL;
  r->next = pg->open;
  if (pg->open != NULL) pg->open->prev = r;
  pg->open = r;
}

static void unlink_open(ludo__pages_t *pg, ludo__pages_region_t *r) {
  if (r->prev != NULL)
    r->prev->next = r->next;
  else
    pg->open = r->next;
  if (r->next != NULL) r->next->prev = r->prev;
  r->next = r->prev = NULL;
}

static void release(ludo__pages_region_t *r) {
  ROOT_DEL(r);
  munmap(r, LUDO__PAGES_REGION);
}

static void unmap_region(ludo__pages_t *pg, ludo__pages_region_t *r) {
  release(r);
  pg->regions--;
}

/* Maps a region aligned to its size: twice the size, the rest unmapped. */
static ludo__pages_region_t *map_region(void) {
  size_t want = 2 * LUDO__PAGES_REGION, head, tail;
  char *m = mmap(NULL, want, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  uintptr_t at;
  ludo__pages_region_t *r;
  if (m == MAP_FAILED) return NULL;
  at = ((uintptr_t)m + LUDO__PAGES_REGION - 1) &
       ~(uintptr_t)(LUDO__PAGES_REGION - 1);
  head = at - (uintptr_t)m;
  tail = want - head - LUDO__PAGES_REGION;
  if (head > 0) munmap(m, head);
  if (tail > 0) munmap((char *)at + LUDO__PAGES_REGION, tail);
#ifdef MADV_HUGEPAGE
  (void)madvise((void *)at, LUDO__PAGES_REGION, MADV_HUGEPAGE); /* a hint */
#endif
  r = (ludo__pages_region_t *)at;
  ROOT_ADD(r);
  memset(r, 0, sizeof *r);
  r->fresh = 1; /* page 0 holds this record */
  return r;
}

ludo__pages_region_t *ludo__pages_map(void) {
  ludo__pages_region_t *r = map_region(); /* its record: the first fault */
  if (r == NULL) return NULL;
#ifdef MADV_POPULATE_WRITE
  /* the rest of it, where it is not one huge page (Linux 5.14; a hint) */
  (void)madvise(r, LUDO__PAGES_REGION, MADV_POPULATE_WRITE);
#endif
  return r;
}

void ludo__pages_init(ludo__pages_t *pg) {
  memset(pg, 0, sizeof *pg);
  atomic_init(&pg->offered, NULL);
}

void ludo__pages_on_low(ludo__pages_t *pg, void (*fn)(void *ud), void *ud) {
  pg->on_low = fn;
  pg->on_low_ud = ud;
}

void ludo__pages_offer(ludo__pages_t *pg, ludo__pages_region_t *r) {
  atomic_store_explicit(&pg->offered, r, memory_order_release);
}

/* The next region, when `open` has none: the spare, the one mapped ahead,
 * else a new one mapped now. */
static ludo__pages_region_t *next_region(ludo__pages_t *pg) {
  ludo__pages_region_t *r;
  if ((r = pg->spare) != NULL) {
    pg->spare = NULL;
  } else if ((r = atomic_exchange_explicit(&pg->offered, NULL,
                                           memory_order_acquire)) != NULL) {
    pg->regions++;
    pg->asked = 0;
  } else {
    if ((r = map_region()) == NULL) return NULL;
    pg->regions++;
  }
  link_open(pg, r);
  pg->left += PAGES_PER_REGION - 1 - r->used;
  return r;
}

void *ludo__pages_get(ludo__pages_t *pg) {
  ludo__pages_region_t *r = pg->open;
  void *page;
  if (r == NULL && (r = next_region(pg)) == NULL) return NULL;
  if (r->given_back != NULL) {
    page = r->given_back;
    r->given_back = *(void **)page;
  } else {
    page = (char *)r + (size_t)r->fresh++ * LUDO__PAGE;
  }
  r->used++;
  pg->used++;
  pg->left--;
  if (!has_pages(r)) unlink_open(pg, r);
  if (pg->left < LUDO__PAGES_LOW && pg->on_low != NULL && !pg->asked &&
      pg->spare == NULL) {
    pg->asked = 1;
    pg->on_low(pg->on_low_ud);
  }
  return page;
}

void ludo__pages_put(ludo__pages_t *pg, void *page) {
  ludo__pages_region_t *r = region_of(page);
  int was_full = !has_pages(r); /* then not in pg->open */
  *(void **)page = r->given_back;
  r->given_back = page;
  r->used--;
  pg->used--;
  if (r->used > 0) {
    if (was_full) link_open(pg, r);
    pg->left++;
    return;
  }
  if (!was_full) { /* its other pages were counted in `left` */
    unlink_open(pg, r);
    pg->left -= PAGES_PER_REGION - 2;
  }
  if (pg->spare == NULL) {
    pg->spare = r;
  } else {
    unmap_region(pg, r);
  }
}

void ludo__pages_free(ludo__pages_t *pg) {
  /* a region with no page out is the spare, or offered: put unmaps the
   * others */
  ludo__pages_region_t *r = atomic_exchange(&pg->offered, NULL);
  if (pg->spare != NULL) {
    unmap_region(pg, pg->spare);
    pg->spare = NULL;
  }
  if (r != NULL) release(r);
}
