/* mockllm.h - starting and stopping the mock LLM server of spec/llm
 * (node spec/llm/mock_llm.js) from a C program: the C tests of ludo.llm
 * and bench/llm_bench.c (which may use the C mock of bench/llm_mock.c
 * instead). Run from the repository root. */
#ifndef LUDO_SPEC_MOCKLLM_H
#define LUDO_SPEC_MOCKLLM_H

#include <sys/types.h>

typedef struct {
  pid_t pid;
  int port;
} mockllm_t;

/* Starts the mock with `script` (the JSON of its script, see the top of
 * mock_llm.js) and reads the port it listens on. The mock ends with this
 * process, even on a failure. Returns 0, or -1 when it did not start. */
int mockllm_start(mockllm_t *m, const char *script);

/* Starts the bench-only C mock (bench/llm_mock.c, the executable `exe`)
 * answering every chat call with "ok" after `delay_ms`, and reads its
 * port. Returns 0 or -1 as above. */
int mockllm_start_c(mockllm_t *m, const char *exe, int delay_ms);

/* Stops the mock (SIGTERM) and waits for it. Returns the CPU seconds of
 * this process's waited-for children so far (the mock's, when it is the
 * only one). */
double mockllm_stop(mockllm_t *m);

#endif
