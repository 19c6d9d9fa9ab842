/* runner.c - runs the C API tests listed in test-list.h.
 *
 *   ludo-ctest [--list] [name...]
 *
 * Each test runs in its own forked process with a timeout (60 s, or
 * $LUDO_CTEST_TIMEOUT seconds). The runner prints "ok name" or
 * "FAIL name: reason" per test and ends with one summary line
 * "ctest: N passed, M failed"; it exits 1 when M > 0. Tests must run from
 * the repository root (they load examples/ and spec/fixtures/). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"
#include "test-list.h"

#define REPORT_MAX 2000

typedef struct {
  const char *name;
  void (*fn)(void);
} test_entry_t;

#define TEST_ENTRY(name) {#name, test_##name},
static const test_entry_t tests[] = {TEST_LIST(TEST_ENTRY){NULL, NULL}};
#undef TEST_ENTRY

/* Where a failing test writes its report: the pipe to the runner. */
static int report_fd = 2;

const char *test__str(const char *s) { return s ? s : "(null)"; }

void test__fail(const char *file, int line, const char *fmt, ...) {
  char buf[REPORT_MAX + 1];
  int n;
  size_t len;
  va_list ap;
  n = snprintf(buf, sizeof buf, "%s:%d: ", file, line);
  if (n < 0) n = 0;
  va_start(ap, fmt);
  vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
  va_end(ap);
  len = strlen(buf);
  while (len > 0) {
    ssize_t w = write(report_fd, buf, len);
    if (w <= 0) break;
    len -= (size_t)w;
  }
  /* _exit: skip atexit handlers (LeakSanitizer would report everything the
   * aborted test still holds, burying the real failure). */
  _exit(1);
}

static double timeout_s(void) {
  const char *e = getenv("LUDO_CTEST_TIMEOUT");
  double t = e ? atof(e) : 0.0;
  /* a hang guard, not a time limit: the fault-injection sweeps fork ~700
   * times, which a loaded 2-core host stretches past 20 s */
  return t > 0.0 ? t : 60.0;
}

/* Runs one test in a child process. Returns 1 when it passed. */
static int run_one(const test_entry_t *t) {
  int fds[2], status = 0, timed_out = 0;
  char report[REPORT_MAX + 1];
  size_t got = 0;
  double deadline;
  pid_t pid;
  if (pipe(fds) != 0) {
    printf("FAIL %s: pipe: %s\n", t->name, strerror(errno));
    return 0;
  }
  fflush(stdout);
  fflush(stderr);
  pid = fork();
  if (pid < 0) {
    printf("FAIL %s: fork: %s\n", t->name, strerror(errno));
    close(fds[0]);
    close(fds[1]);
    return 0;
  }
  if (pid == 0) {
    close(fds[0]);
    report_fd = fds[1];
    t->fn();
    test__cleanup();
    fflush(stdout);
    exit(0); /* atexit handlers run: LeakSanitizer checks here */
  }
  close(fds[1]);
  deadline = test_now() + timeout_s();
  for (;;) {
    struct pollfd p = {fds[0], POLLIN, 0};
    double left = deadline - test_now();
    int r;
    ssize_t n;
    if (left <= 0) {
      timed_out = 1;
      kill(pid, SIGKILL);
      break;
    }
    r = poll(&p, 1, (int)(left * 1000) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    n = read(fds[0], report + got, REPORT_MAX - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break; /* EOF: the child exited (or closed the pipe) */
    got += (size_t)n;
    if (got == REPORT_MAX) break;
  }
  close(fds[0]);
  report[got] = '\0';
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    printf("FAIL %s: timed out after %.0f s%s%s\n", t->name, timeout_s(),
           got ? "; " : "", report);
    return 0;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && got == 0) {
    printf("ok %s\n", t->name);
    return 1;
  }
  if (got > 0)
    printf("FAIL %s: %s\n", t->name, report);
  else if (WIFSIGNALED(status))
    printf("FAIL %s: killed by signal %d (%s)\n", t->name, WTERMSIG(status),
           strsignal(WTERMSIG(status)));
  else
    printf("FAIL %s: exit status %d (see stderr)\n", t->name,
           WEXITSTATUS(status));
  return 0;
}

static const test_entry_t *find(const char *name) {
  const test_entry_t *t;
  for (t = tests; t->name; t++)
    if (strcmp(t->name, name) == 0) return t;
  return NULL;
}

int main(int argc, char **argv) {
  const test_entry_t *t;
  int passed = 0, failed = 0, i;
  if (argc > 1 && strcmp(argv[1], "--list") == 0) {
    for (t = tests; t->name; t++) printf("%s\n", t->name);
    return 0;
  }
  if (argc > 1) {
    for (i = 1; i < argc; i++) {
      t = find(argv[i]);
      if (t == NULL) {
        printf("FAIL %s: no such test (see --list)\n", argv[i]);
        failed++;
      } else if (run_one(t)) {
        passed++;
      } else {
        failed++;
      }
    }
  } else {
    for (t = tests; t->name; t++) {
      if (run_one(t))
        passed++;
      else
        failed++;
    }
  }
  printf("ctest: %d passed, %d failed\n", passed, failed);
  return failed > 0 ? 1 : 0;
}
