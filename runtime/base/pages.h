/* pages.h - 4 KiB pages from 2 MiB regions the runtime maps itself, for
 * the small-object arenas of its Lua states (script/arena.h).
 *
 * Why: at thousands of sessions a step finds neither its session's lines
 * in the caches nor the translations of its pages in the TLB. The lines
 * are asked for ahead (env/session.c); the page walks cost on top. From
 * malloc, a 4 KiB chunk straddles two pages and sits among other
 * sessions' blocks; here each chunk is one aligned page, and each region
 * is asked to be backed by one huge page (madvise MADV_HUGEPAGE, honoured
 * when the kernel's transparent huge pages are "madvise" or "always"), so
 * 511 chunks share one translation. Measured in docs/performance.md,
 * "Session 33".
 *
 * A region's first page holds its record; the other 511 are handed out,
 * pages given back first, then pages never used, in address order. A
 * region whose pages all came back is kept as the one spare (so a host
 * opening and closing one session does not map and unmap a region each
 * time) or unmapped when there is a spare already.
 *
 * The first use of a new region is slow: the kernel zeroes a huge page,
 * and on a virtual machine the host may have to back it too (3-4 ms here,
 * against 0.1 ms for memory the machine used before). So the owner can
 * have regions mapped ahead off its thread (ludo__pages_on_low): a step
 * that needs a chunk then finds a region ready instead of waiting for
 * the fault.
 *
 * One per runtime (core/core.h), used by its thread only: no locking.
 * Other threads call only ludo__pages_map and ludo__pages_offer. */
#ifndef LUDO_BASE_PAGES_H
#define LUDO_BASE_PAGES_H

#include <stdatomic.h>
#include <stddef.h>

#define LUDO__PAGE 4096u
#define LUDO__PAGES_REGION ((size_t)2 << 20)

/* Below this many pages left in the open regions, a region is asked for
 * ahead (ludo__pages_on_low): half a region, about what a busy runtime
 * takes while one region's first use lasts. */
#define LUDO__PAGES_LOW 256u

typedef struct ludo__pages_region_s ludo__pages_region_t;

typedef struct ludo__pages_s {
  ludo__pages_region_t *open;  /* regions with pages left to hand out */
  ludo__pages_region_t *spare; /* a region with every page back, or NULL */
  /* a region mapped ahead on another thread, not yet taken, or NULL */
  _Atomic(ludo__pages_region_t *) offered;
  size_t regions;              /* regions mapped and taken, the spare
                                  included */
  size_t used;                 /* pages handed out */
  size_t left;                 /* pages not handed out, in `open` */
  int asked;                   /* on_low called, its region not taken */
  void (*on_low)(void *ud);    /* see ludo__pages_on_low */
  void *on_low_ud;
} ludo__pages_t;

/* An empty source: maps nothing until the first ludo__pages_get. */
void ludo__pages_init(ludo__pages_t *pg);

/* A page of LUDO__PAGE bytes aligned to LUDO__PAGE, its contents
 * unspecified; NULL when a new region was needed and could not be mapped
 * (the system is out of memory). */
void *ludo__pages_get(ludo__pages_t *pg);

/* Gives back a page ludo__pages_get returned (it must not be used
 * after). */
void ludo__pages_put(ludo__pages_t *pg, void *page);

/* Unmaps every region whose pages are all back, and one offered and not
 * taken; a region with a page still out stays mapped (its owner may use
 * it). No thread may offer a region after. */
void ludo__pages_free(ludo__pages_t *pg);

/* Asks for regions ahead: once the pages left in the open regions fall
 * below LUDO__PAGES_LOW, with no spare region, ludo__pages_get calls
 * fn(ud), once until the region offered in answer (ludo__pages_offer) is
 * taken. fn has another thread run ludo__pages_map and offer what it
 * mapped; fn must not call into pg. NULL (the default): never asks. */
void ludo__pages_on_low(ludo__pages_t *pg, void (*fn)(void *ud), void *ud);

/* A new region, mapped and its memory faulted in; NULL when the system
 * has no memory. Reads and writes no ludo__pages_t: any thread may call
 * it. The region is the caller's until given to ludo__pages_offer. */
ludo__pages_region_t *ludo__pages_map(void);

/* The answer to on_low, from any thread: r (from ludo__pages_map, not
 * NULL) is what the next ludo__pages_get that needs a new region takes,
 * before it would map one (a spare goes first); on_low may be called
 * again then. One offer per on_low call. */
void ludo__pages_offer(ludo__pages_t *pg, ludo__pages_region_t *r);

#endif
