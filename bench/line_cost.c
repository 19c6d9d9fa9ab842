/* line_cost.c - what a cache line costs from memory on this machine when
 * many are asked for at once, as a step of thousands of sessions asks for
 * its session's lines (docs/performance.md, "Session 39"): a 512 MiB
 * buffer (on huge pages when the kernel gives them, as the arena's
 * regions are), 256 lines a round at random places, all asked for ahead
 * (__builtin_prefetch) and then read, in runs of 1 to 64 neighbouring
 * lines. Prints the time per line of each run length, and the baseline:
 * the same reads with the buffer's lines in the caches (a 256 KiB
 * buffer). Also the latency of one line nobody asked for: a chase of
 * dependent loads through the buffer, each load's address read by the one
 * before (what a line a step reads without its having been asked for
 * costs on the step's path; docs/performance.md, "Session 40").
 * Standalone: no ludo, no flags beyond -O2.
 *
 *   cc -O2 -o /tmp/line-cost bench/line_cost.c && taskset -c 0 /tmp/line-cost */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define LINES_PER_ROUND 256
#define ROUNDS 20000

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* ns per line reading `run` neighbouring lines at LINES_PER_ROUND / run
 * random places of m[0..size), each round asked for ahead first. */
static double per_line(const char *m, size_t size, int run, uint64_t *seed,
                       uint64_t *sink) {
  size_t places = size / (64 * (size_t)run), at[LINES_PER_ROUND];
  int n = LINES_PER_ROUND / run, r, i, j;
  uint64_t acc = 0;
  double t0 = now_s(), gen = 0;
  for (r = 0; r < ROUNDS; r++) {
    double g0 = now_s();
    for (i = 0; i < n; i++) at[i] = next(seed) % places * 64 * (size_t)run;
    gen += now_s() - g0;
    for (i = 0; i < n; i++)
      for (j = 0; j < run; j++) __builtin_prefetch(m + at[i] + 64 * j, 0, 3);
    for (i = 0; i < n; i++)
      for (j = 0; j < run; j++) acc += (unsigned char)m[at[i] + 64 * j];
  }
  *sink += acc;
  return (now_s() - t0 - gen) * 1e9 / ((double)n * run * ROUNDS);
}

/* ns per load of CHASE loads chasing through the lines of m[0..size) in
 * a random cycle (Sattolo's shuffle): each line holds the offset of the
 * next, so each load waits for the one before. */
#define CHASE 2000000
static double chase(char *m, size_t size, uint64_t *seed, uint64_t *sink) {
  size_t lines = size / 64, i, at;
  size_t *cycle = malloc(lines * sizeof *cycle);
  double t0;
  if (cycle == NULL) return 0;
  for (i = 0; i < lines; i++) cycle[i] = i;
  for (i = lines - 1; i > 0; i--) { /* one cycle through every line */
    size_t j = next(seed) % i, t = cycle[i];
    cycle[i] = cycle[j];
    cycle[j] = t;
  }
  for (i = 0; i < lines; i++) {
    size_t to = cycle[i] * 64;
    memcpy(m + i * 64, &to, sizeof to);
  }
  free(cycle);
  at = 0;
  t0 = now_s();
  for (i = 0; i < CHASE; i++) memcpy(&at, m + at, sizeof at);
  *sink += at;
  return (now_s() - t0) * 1e9 / CHASE;
}

int main(void) {
  static const int runs[] = {1, 2, 4, 8, 16, 64};
  size_t big = (size_t)512 << 20, small = (size_t)256 << 10;
  uint64_t seed = 88172645463325252ull, sink = 0;
  char *m = mmap(NULL, big, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  double cached;
  size_t k;
  if (m == MAP_FAILED) {
    perror("line_cost: mmap");
    return 1;
  }
  (void)madvise(m, big, MADV_HUGEPAGE);
  memset(m, 1, big);
  cached = per_line(m, small, 1, &seed, &sink);
  printf("baseline: a line in the caches %.2f ns\n", cached);
  for (k = 0; k < sizeof runs / sizeof *runs; k++) {
    double t = per_line(m, big, runs[k], &seed, &sink);
    printf("runs of %2d lines from memory: %6.2f ns a line, %5.1fx the "
           "baseline\n", runs[k], t, t / cached);
  }
  printf("a line not asked for (dependent loads): %.1f ns\n",
         chase(m, big, &seed, &sink));
  return sink == 42 ? 2 : 0; /* keeps the reads */
}
