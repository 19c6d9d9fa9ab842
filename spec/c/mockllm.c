/* mockllm.c - the mock LLM server as a child process (see mockllm.h). */
#include "mockllm.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* Writes `script` to a temporary file; its name goes into `path`. */
static int write_script(char *path, const char *script) {
  size_t n = strlen(script);
  int fd = mkstemp(path), ok;
  if (fd < 0) return -1;
  ok = write(fd, script, n) == (ssize_t)n;
  close(fd);
  return ok ? 0 : -1;
}

/* Runs argv with its stdout on a pipe and reads the port from the line
 * the mock prints once it listens. */
static int spawn(mockllm_t *m, char *const argv[]) {
  char line[256];
  int pfd[2], rc = -1;
  FILE *out;
  if (pipe(pfd) != 0) return -1;
  m->pid = fork();
  if (m->pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM); /* goes with us, even on a failure */
    dup2(pfd[1], 1);
    close(pfd[0]);
    execvp(argv[0], argv);
    _exit(127);
  }
  close(pfd[1]);
  out = fdopen(pfd[0], "r");
  if (out != NULL && fgets(line, sizeof line, out) != NULL &&
      sscanf(line, "mock-llm listening on http://127.0.0.1:%d", &m->port) ==
          1)
    rc = 0;
  if (out != NULL) fclose(out);
  return rc;
}

int mockllm_start(mockllm_t *m, const char *script) {
  char path[] = "/tmp/ludo-mock-llm-XXXXXX";
  char *argv[] = {"node", "spec/llm/mock_llm.js", "--script", path, NULL};
  int rc;
  if (write_script(path, script) != 0) return -1;
  rc = spawn(m, argv);
  unlink(path);
  return rc;
}

int mockllm_start_c(mockllm_t *m, const char *exe, int delay_ms) {
  char delay[32];
  char *argv[] = {(char *)exe, "--delay-ms", delay, NULL};
  snprintf(delay, sizeof delay, "%d", delay_ms);
  return spawn(m, argv);
}

double mockllm_stop(mockllm_t *m) {
  struct rusage ru;
  kill(m->pid, SIGTERM);
  waitpid(m->pid, NULL, 0);
  getrusage(RUSAGE_CHILDREN, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}
