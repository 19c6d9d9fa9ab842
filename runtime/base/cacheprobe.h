/* cacheprobe.h - which lines of memory a piece of code touched, told by
 * the processor's caches.
 *
 * Nothing on a virtual machine reports which 64-byte lines a step of a
 * Lua state reads (no memory-sampling counters; the kernel's access bits
 * are per 4 KiB page). The caches do: evict the lines of a range
 * (ludo__cache_evict), run the code, then time one load of each line
 * (ludo__cache_probe). A line the code touched comes back from a near
 * cache in tens of cycles; one it did not comes from memory, several
 * times slower. The processor's own prefetchers may have brought a
 * neighbour of a touched line, which then counts as touched: an over-
 * estimate of the lines, never an under-estimate, of what the code makes
 * the processor fetch.
 *
 * x86-64 only (clflush and rdtscp are unprivileged there); elsewhere, or
 * when the timer cannot tell a near line from a far one (a hypervisor
 * trapping rdtscp), ludo__cache_threshold returns 0 and callers do
 * without. The loads are inline assembly, so AddressSanitizer neither
 * checks nor reports them: the ranges may hold poisoned free blocks. */
#ifndef LUDO_BASE_CACHEPROBE_H
#define LUDO_BASE_CACHEPROBE_H

#include <stddef.h>
#include <stdint.h>

/* The load time, in timer ticks, under which a line counts as held by a
 * near cache; measured once per process on first use (a few
 * microseconds). 0: lines cannot be told apart here. Thread-safe. */
unsigned ludo__cache_threshold(void);

/* Evicts every line of the n bytes at p from all caches (p need not be
 * aligned; the lines must be mapped). Call only when the threshold is
 * not 0. */
void ludo__cache_evict(const void *p, size_t n);

/* Times one load of each of the n lines at lines[0..n), in that order,
 * and sets held[i] to 1 when line i loaded in fewer than `threshold`
 * ticks (a near cache held it), else 0; the lines are then held. lines
 * and held must not be among them. One loop compiled here and never
 * inlined, so what runs between two probes (and what the processor's
 * prefetchers see of it) does not change with the caller's code. A probe
 * that misses can make the processor bring other lines near it, which
 * then read as held: callers probe few lines of any 512-byte region at a
 * time (script/arena.c). */
void ludo__cache_probe(const void *const *lines, size_t n, unsigned threshold,
                       unsigned char *held);

#endif
