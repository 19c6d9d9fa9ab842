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
 * One per runtime (core/core.h), used by its thread only: no locking. */
#ifndef LUDO_BASE_PAGES_H
#define LUDO_BASE_PAGES_H

#include <stddef.h>

#define LUDO__PAGE 4096u
#define LUDO__PAGES_REGION ((size_t)2 << 20)

typedef struct ludo__pages_region_s ludo__pages_region_t;

typedef struct ludo__pages_s {
  ludo__pages_region_t *open;  /* regions with pages left to hand out */
  ludo__pages_region_t *spare; /* a region with every page back, or NULL */
  size_t regions;              /* regions mapped, the spare included */
  size_t used;                 /* pages handed out */
} ludo__pages_t;

/* An empty source: maps nothing until the first ludo__pages_get. A
 * zeroed ludo__pages_t is the same. */
void ludo__pages_init(ludo__pages_t *pg);

/* A page of LUDO__PAGE bytes aligned to LUDO__PAGE, its contents
 * unspecified; NULL when a new region was needed and could not be mapped
 * (the system is out of memory). */
void *ludo__pages_get(ludo__pages_t *pg);

/* Gives back a page ludo__pages_get returned (it must not be used
 * after). */
void ludo__pages_put(ludo__pages_t *pg, void *page);

/* Unmaps every region whose pages are all back; a region with a page
 * still out stays mapped (its owner may use it). */
void ludo__pages_free(ludo__pages_t *pg);

#endif
