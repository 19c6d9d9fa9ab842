/* eval_resume.c - how long `ludo eval --resume` takes to read back a
 * results.jsonl of 100,000 episodes (the figure: <= 1 s), with the
 * runner's own readers (runtime/cli/eval_output.c):
 *   eval.resume.scan  what --resume does before running: every line's
 *                     episode and whether it was cancelled
 *                     (eval_results_scan)
 *   eval.resume.text  what the summary needs after it: the records as
 *                     one JSON array, the last of each episode kept,
 *                     ordered by episode (eval_results_text)
 * Baseline in the same run: reading the file's bytes and counting its
 * lines.
 *
 * usage: build/ludo-eval-resume-bench [N]   (N records, default 100000) */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/eval.h"

void ludo__cli_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

/* A record as `ludo eval` writes them, with 3 rubrics. */
static void write_file(const char *dir, long n) {
  char path[512];
  FILE *f;
  long i;
  snprintf(path, sizeof path, "%s/results.jsonl", dir);
  f = fopen(path, "w");
  for (i = 0; i < n; i++)
    fprintf(f,
            "{\"episode\":%ld,\"task\":\"test-%ld\",\"repeat\":0,\"seed\":"
            "%llu,\"steps\":12,\"reward\":3.4400000000000004,\"rubrics\":"
            "{\"total\":3.4400000000000004,\"rubric_0\":2.3999999999999999,"
            "\"rubric_1\":5.0,\"rubric_2\":5.0},\"done\":true,\"truncated\":"
            "false,\"success\":true,\"invalid_actions\":0,\"error\":null,"
            "\"wall_ms\":12.624472000425158,\"cpu_ms\":1.0516496801295929,"
            "\"llm\":{\"calls\":3,\"failures\":0,\"prompt_tokens\":100,"
            "\"completion_tokens\":20},\"trajectory\":"
            "\"trajectories/%06ld.jsonl\"}\n",
            i, i % 500, (unsigned long long)eval_episode_seed(1, i), i);
  fclose(f);
}

static double bytes_pass(const char *dir) {
  char path[512], buf[1 << 16];
  double t0 = eval_now();
  size_t n, lines = 0, i;
  FILE *f;
  snprintf(path, sizeof path, "%s/results.jsonl", dir);
  f = fopen(path, "rb");
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
    const char *p = buf, *end = buf + n;
    while ((p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
      lines++;
      p++;
    }
  }
  (void)i;
  fclose(f);
  if (lines == 0) fprintf(stderr, "empty\n");
  return eval_now() - t0;
}

static long scanned;
static const char *count(void *ud, const eval_line_t *l) {
  (void)ud;
  scanned += !l->rerun;
  return NULL;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 100000;
  char dir[] = "/tmp/ludo-eval-resume-XXXXXX", path[512];
  double best = 1e9, base = 1e9, scan = 1e9;
  int round;
  if (mkdtemp(dir) == NULL) return 1;
  write_file(dir, n);
  for (round = 0; round < 3; round++) {
    ludo__cli_buf_t text = {0};
    long long got;
    double t0 = eval_now(), b;
    if (eval_results_text(dir, &text, &got) != 0 || got != n) {
      fprintf(stderr, "read %lld records, wanted %ld\n", got, n);
      return 1;
    }
    t0 = eval_now() - t0;
    ludo__cli_buf_free(&text);
    if (t0 < best) best = t0;
    scanned = 0;
    t0 = eval_now();
    if (eval_results_scan(dir, 0, count, NULL) != 0 || scanned != n) {
      fprintf(stderr, "scanned %ld records, wanted %ld\n", scanned, n);
      return 1;
    }
    t0 = eval_now() - t0;
    if (t0 < scan) scan = t0;
    b = bytes_pass(dir);
    if (b < base) base = b;
  }
  printf("eval.resume.scan %ld records: %.3f s (target <= 1 s: %s); "
         "baseline reading the bytes %.4f s, ratio %.1fx\n",
         n, scan, scan <= 1.0 ? "met" : "MISSED", base, scan / base);
  printf("eval.resume.text %ld records (for the summary): %.3f s; "
         "ratio to the bytes %.1fx\n", n, best, best / base);
  snprintf(path, sizeof path, "%s/results.jsonl", dir);
  unlink(path);
  rmdir(dir);
  return 0;
}
