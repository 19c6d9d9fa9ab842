/* helpers.h - shared helpers of the C API tests: a counting allocator that
 * checks the runtime's size bookkeeping, runtimes that must give every
 * byte back, a capturing logger, JSON access with jansson, and a clock. */
#ifndef LUDO_SPEC_HELPERS_H
#define LUDO_SPEC_HELPERS_H

#include <jansson.h>

#include "task.h"

/* Turns a string literal into the (json, len) pair of a ludo call. */
#define J(lit) (lit), (sizeof(lit) - 1)

/* ---- counting allocator ---------------------------------------------- */

/* A ludo_alloc_fn that keeps a header with each block's size, so it can
 * count live bytes and blocks and check the osize the runtime passes back
 * (lua_Alloc contract). With fail_at >= 0 it refuses the fail_at-th
 * growing call (0-based) and every one after it while fail_sticky is set. */
typedef struct test_alloc_s {
  size_t live;                  /* bytes live */
  size_t blocks;                /* blocks live */
  size_t peak;
  unsigned long grows;          /* growing calls seen (mallocs, reallocs) */
  long fail_at;                 /* -1: never fail */
  int fail_sticky;
  unsigned long refused;
  unsigned long osize_mismatch; /* frees/reallocs with a wrong osize */
} test_alloc_t;

void *test_alloc_fn(void *ud, void *ptr, size_t osize, size_t nsize);

/* The allocator every runtime made by test_rt_new() uses (one test per
 * process, so one global is enough). */
extern test_alloc_t test_heap;

/* ---- logger ---------------------------------------------------------- */

typedef struct test_log_s {
  unsigned long lines;
  char last[1024];              /* last line, NUL-terminated, cut */
  char last_who[64];
  int last_level;
} test_log_t;

extern test_log_t test_log;

/* ---- runtimes -------------------------------------------------------- */

/* Fills `o` with ludo_options_init() defaults plus the counting allocator
 * and the capturing logger. */
void test_options(ludo_options_t *o);

/* Creates a runtime (o may be NULL: test_options defaults); fails the test
 * on error. */
#define test_rt_new(o) test__rt_new(__FILE__, __LINE__, (o))
ludo_runtime_t *test__rt_new(const char *file, int line, ludo_options_t *o);

/* Frees the runtime, then asserts that the counting allocator got every
 * byte and block back with matching sizes: the close-loop check of every
 * test. */
#define test_rt_free(rt) test__rt_free(__FILE__, __LINE__, (rt))
void test__rt_free(const char *file, int line, ludo_runtime_t *rt);

/* Loads an environment; fails the test with ludo_runtime_errmsg() when it
 * cannot. */
#define test_env_load(rt, path, o) \
  test__env_load(__FILE__, __LINE__, (rt), (path), (o))
ludo_env_t *test__env_load(const char *file, int line, ludo_runtime_t *rt,
                           const char *path, const ludo_env_options_t *o);

#define test_open(env) test__open(__FILE__, __LINE__, (env))
ludo_session_t *test__open(const char *file, int line, ludo_env_t *env);

/* A runtime with test_options defaults (in *rt) and an open session of
 * examples/echo: the setup most tests share. */
#define test_echo_session(rt) test__echo_session(__FILE__, __LINE__, (rt))
ludo_session_t *test__echo_session(const char *file, int line,
                                   ludo_runtime_t **rt);

/* ---- JSON ------------------------------------------------------------ */

/* Parses a result; fails the test when it is not JSON. The value is freed
 * after the test (test__cleanup). */
#define JPARSE(s, len) test__jparse(__FILE__, __LINE__, (s), (len))
json_t *test__jparse(const char *file, int line, const char *s, size_t len);

/* Value at a '/'-separated path of object keys ("observation/metadata/
 * rubrics/total"); fails the test when a key is missing. */
#define JGET(root, path) test__jget(__FILE__, __LINE__, (root), (path))
json_t *test__jget(const char *file, int line, json_t *root,
                   const char *path);
/* Same, but returns NULL when missing. */
json_t *test_jfind(json_t *root, const char *path);

/* Typed reads that fail the test on a type mismatch. */
#define JSTR(root, path) test__jstr(__FILE__, __LINE__, (root), (path))
#define JINT(root, path) test__jint(__FILE__, __LINE__, (root), (path))
#define JNUM(root, path) test__jnum(__FILE__, __LINE__, (root), (path))
const char *test__jstr(const char *file, int line, json_t *root,
                       const char *path);
long long test__jint(const char *file, int line, json_t *root,
                     const char *path);
double test__jnum(const char *file, int line, json_t *root,
                  const char *path);

/* ---- misc ------------------------------------------------------------ */

/* Monotonic seconds. */
double test_now(void);

/* Runs after each test body in the test process: frees parsed JSON. */
void test__cleanup(void);

#endif
