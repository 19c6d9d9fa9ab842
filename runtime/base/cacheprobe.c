/* cacheprobe.c - which lines a piece of code touched (see cacheprobe.h). */
#include "base/cacheprobe.h"

#if defined(__x86_64__)

static uint64_t ticks(void) {
  uint32_t lo, hi, aux;
  __asm__ __volatile__("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux));
  return ((uint64_t)hi << 32) | lo;
}

static void evict_line(const void *p) {
  __asm__ __volatile__("clflush (%0)" : : "r"(p) : "memory");
}

/* Ticks one load of the line at p takes, ordered against the timer. */
static unsigned timed_load(const void *p) {
  uint64_t t0, t1;
  unsigned long v;
  __asm__ __volatile__("lfence" ::: "memory");
  t0 = ticks();
  __asm__ __volatile__("mov (%1), %0" : "=r"(v) : "r"(p) : "memory");
  t1 = ticks();
  __asm__ __volatile__("lfence" ::: "memory");
  (void)v;
  return (unsigned)(t1 - t0);
}

void ludo__cache_evict(const void *p, size_t n) {
  const char *c = (const char *)((uintptr_t)p & ~(uintptr_t)63);
  const char *end = (const char *)p + n;
  for (; c < end; c += 64) evict_line(c);
  __asm__ __volatile__("mfence" ::: "memory");
}

__attribute__((noinline)) void ludo__cache_probe(const void *const *lines,
                                                  size_t n, unsigned threshold,
                                                  unsigned char *held) {
  size_t i;
  for (i = 0; i < n; i++) held[i] = timed_load(lines[i]) < threshold;
}

static void sort(unsigned *v, int n) {
  int i, j;
  for (i = 1; i < n; i++)
    for (j = i; j > 0 && v[j - 1] > v[j]; j--) {
      unsigned t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
}

/* Loads of a held line and of evicted ones, medians compared: the
 * threshold is their midpoint when an evicted line takes at least 3x a
 * held one, else 0. */
static unsigned calibrate(void) {
  enum { N = 15 };
  static char lines[N][128] __attribute__((aligned(64)));
  unsigned near[N], far[N];
  int i;
  for (i = 0; i < N; i++) {
    lines[i][0] = (char)i;
    (void)timed_load(lines[i]);
    near[i] = timed_load(lines[i]);
  }
  for (i = 0; i < N; i++) evict_line(lines[i]);
  __asm__ __volatile__("mfence" ::: "memory");
  for (i = 0; i < N; i++) far[i] = timed_load(lines[i * 7 % N]);
  sort(near, N);
  sort(far, N);
  if (far[N / 2] < 3 * near[N / 2]) return 0;
  return (near[N / 2] + far[N / 2]) / 2;
}

unsigned ludo__cache_threshold(void) {
  static unsigned cached; /* 0: not measured; else threshold + 1 */
  unsigned t = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  int tries;
  if (t == 0) {
    /* an interrupt in the middle can spoil a measurement: a few tries */
    for (tries = 0; tries < 5 && t == 0; tries++) t = calibrate();
    __atomic_store_n(&cached, t + 1, __ATOMIC_RELAXED);
    return t;
  }
  return t - 1;
}

#else

unsigned ludo__cache_threshold(void) { return 0; }

void ludo__cache_evict(const void *p, size_t n) {
  (void)p;
  (void)n;
}

void ludo__cache_probe(const void *const *lines, size_t n, unsigned threshold,
                       unsigned char *held) {
  size_t i;
  (void)lines;
  (void)threshold;
  for (i = 0; i < n; i++) held[i] = 1;
}

#endif
