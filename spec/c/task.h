/* task.h - the C API test harness: TEST_IMPL and typed assertions.
 *
 * Each test is `TEST_IMPL(name) { ... }` listed in test-list.h. The runner
 * (runner.c) runs every test in its own forked process with a timeout; a
 * failed assertion writes one line "file:line: what failed" to the
 * runner's pipe and exits the test process with status 1 (the report is
 * cut at 2000 bytes). Assertions print both operands. */
#ifndef LUDO_SPEC_TASK_H
#define LUDO_SPEC_TASK_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ludo.h"

typedef const void *test__ptr_t;

#define TEST_IMPL(name) void test_##name(void)
#define TEST_DECLARE(name) void test_##name(void);

/* Reports a failure and ends the test process (exit status 1). */
void test__fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));

/* Returns `s`, or "(null)" when it is NULL. */
const char *test__str(const char *s);

#define FAIL(...) test__fail(__FILE__, __LINE__, __VA_ARGS__)

/* `sa`/`sb` are the operands' source text, taken by the public macros
 * before their arguments are expanded. */
#define ASSERT__CMP(type, fmt, a, op, b, sa, sb)                             \
  do {                                                                       \
    type test__a = (type)(a), test__b = (type)(b);                           \
    if (!(test__a op test__b))                                               \
      test__fail(__FILE__, __LINE__,                                         \
                 "ASSERT(%s %s %s) failed: " fmt " vs " fmt, sa, #op, sb,    \
                 test__a, test__b);                                          \
  } while (0)

/* Integers (compared as long long). */
#define ASSERT_EQ(a, b) ASSERT__CMP(long long, "%lld", a, ==, b, #a, #b)
#define ASSERT_NE(a, b) ASSERT__CMP(long long, "%lld", a, !=, b, #a, #b)
#define ASSERT_LT(a, b) ASSERT__CMP(long long, "%lld", a, <, b, #a, #b)
#define ASSERT_LE(a, b) ASSERT__CMP(long long, "%lld", a, <=, b, #a, #b)
#define ASSERT_GT(a, b) ASSERT__CMP(long long, "%lld", a, >, b, #a, #b)
#define ASSERT_GE(a, b) ASSERT__CMP(long long, "%lld", a, >=, b, #a, #b)
/* Sizes and counters. */
typedef unsigned long long test__ull_t;
#define ASSERT_UINT_EQ(a, b) ASSERT__CMP(test__ull_t, "%llu", a, ==, b, #a, #b)
#define ASSERT_UINT_GT(a, b) ASSERT__CMP(test__ull_t, "%llu", a, >, b, #a, #b)
#define ASSERT_UINT_GE(a, b) ASSERT__CMP(test__ull_t, "%llu", a, >=, b, #a, #b)
#define ASSERT_UINT_LE(a, b) ASSERT__CMP(test__ull_t, "%llu", a, <=, b, #a, #b)
/* Floating point. */
#define ASSERT_DBL_LT(a, b) ASSERT__CMP(double, "%.6g", a, <, b, #a, #b)
#define ASSERT_DBL_GE(a, b) ASSERT__CMP(double, "%.6g", a, >=, b, #a, #b)
#define ASSERT_PTR_EQ(a, b) ASSERT__CMP(test__ptr_t, "%p", a, ==, b, #a, #b)
#define ASSERT_PTR_NE(a, b) ASSERT__CMP(test__ptr_t, "%p", a, !=, b, #a, #b)

#define ASSERT_TRUE(c)                                                       \
  do {                                                                       \
    if (!(c)) test__fail(__FILE__, __LINE__, "ASSERT_TRUE(%s) failed", #c);  \
  } while (0)

#define ASSERT_NULL(p)                                                       \
  do {                                                                       \
    const void *test__p = (const void *)(p);                                 \
    if (test__p != NULL)                                                     \
      test__fail(__FILE__, __LINE__, "ASSERT_NULL(%s) failed: %p", #p,       \
                 test__p);                                                   \
  } while (0)

#define ASSERT_NOT_NULL(p)                                                   \
  do {                                                                       \
    if ((const void *)(p) == NULL)                                           \
      test__fail(__FILE__, __LINE__, "ASSERT_NOT_NULL(%s) failed", #p);      \
  } while (0)

/* A ludo call returned 0; otherwise prints the code's name. */
#define ASSERT_OK(rc)                                                        \
  do {                                                                       \
    int test__rc = (rc);                                                     \
    if (test__rc != 0)                                                       \
      test__fail(__FILE__, __LINE__, "ASSERT_OK(%s) failed: %d %s", #rc,     \
                 test__rc, ludo_err_name(test__rc));                         \
  } while (0)

/* A ludo call returned the error `code` (both printed by name). */
#define ASSERT_ERR(rc, code)                                                 \
  do {                                                                       \
    int test__rc = (rc), test__code = (code);                                \
    if (test__rc != test__code)                                              \
      test__fail(__FILE__, __LINE__, "ASSERT_ERR(%s, %s) failed: got %d %s," \
                 " want %d %s", #rc, #code, test__rc,                        \
                 ludo_err_name(test__rc), test__code,                        \
                 ludo_err_name(test__code));                                 \
  } while (0)

#define ASSERT_STR_EQ(a, b)                                                  \
  do {                                                                       \
    const char *test__a = (a), *test__b = (b);                               \
    if (test__a == NULL || test__b == NULL || strcmp(test__a, test__b) != 0) \
      test__fail(__FILE__, __LINE__, "ASSERT_STR_EQ(%s, %s) failed: \"%s\" " \
                 "vs \"%s\"", #a, #b, test__str(test__a),                    \
                 test__str(test__b));                                        \
  } while (0)

#define ASSERT_STR_NE(a, b)                                                  \
  do {                                                                       \
    const char *test__a = (a), *test__b = (b);                               \
    if (test__a == NULL || test__b == NULL || strcmp(test__a, test__b) == 0) \
      test__fail(__FILE__, __LINE__, "ASSERT_STR_NE(%s, %s) failed: \"%s\" " \
                 "vs \"%s\"", #a, #b, test__str(test__a),                    \
                 test__str(test__b));                                        \
  } while (0)

#define ASSERT_STR_CONTAINS(hay, needle)                                     \
  do {                                                                       \
    const char *test__h = (hay), *test__n = (needle);                        \
    if (test__h == NULL || strstr(test__h, test__n) == NULL)                 \
      test__fail(__FILE__, __LINE__, "ASSERT_STR_CONTAINS(%s, %s) failed: "  \
                 "\"%s\" does not contain \"%s\"", #hay, #needle,            \
                 test__str(test__h), test__n);                               \
  } while (0)

#endif
