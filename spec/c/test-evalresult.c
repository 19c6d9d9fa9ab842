/* test-evalresult.c - the walk `ludo eval` reads a step's result with
 * (runtime/cli/eval_result.c): numbers in JSON's grammar are read as
 * strtod reads them, and any other number text (leading zeros, hex, inf,
 * nan, a bare '.', an overflow) makes the walk give up, so the result goes
 * to jansson, which refuses it, instead of a wrong reward. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/eval.h"
#include "helpers.h"

static void no_score(void *ud, const char *path, size_t n, double score) {
  (void)ud, (void)path, (void)n, (void)score;
}

/* Reads {"reward":<text>,"done":false}: 0 and *v, or -1. */
static int read_reward(const char *text, double *v) {
  char json[128];
  eval_step_t st;
  int n = snprintf(json, sizeof json, "{\"reward\":%s,\"done\":false}", text);
  int rc = eval_step_read(json, (size_t)n, &st, no_score, NULL);
  if (rc == 0) {
    if (!st.has_reward) return -2;
    *v = st.reward;
  }
  return rc;
}

TEST_IMPL(eval_result_numbers) {
  static const char *const good[] = {
      "0", "-0", "7", "0.5", "-2.25", "1e-7", "1E+3", "9.9e16",
      "12345678901234567890", "0.1000000000000000055511151231257827",
      "2.2250738585072014e-308", "1.7976931348623157e308"};
  static const char *const bad[] = {
      "07", "-07", "0x10", "1.", ".5", "-", "+1", "1e", "1e+", "-inf",
      "inf", "nan", "-nan", "Infinity", "1e400", "-1e400", "1.5x"};
  size_t i;
  for (i = 0; i < sizeof good / sizeof *good; i++) {
    double v = -1;
    if (read_reward(good[i], &v) != 0) FAIL("refused %s", good[i]);
    if (v != strtod(good[i], NULL)) FAIL("%s read as %.17g", good[i], v);
  }
  for (i = 0; i < sizeof bad / sizeof *bad; i++) {
    double v = 0;
    if (read_reward(bad[i], &v) == 0) FAIL("accepted %s as %.17g", bad[i], v);
  }
}

/* Collects the scores a walk reports, as "path=score;" text. */
static void collect(void *ud, const char *path, size_t n, double score) {
  char *t = ud;
  size_t at = strlen(t);
  snprintf(t + at, 256 - at, "%.*s=%g;", (int)n, path, score);
}

/* A rubric with no score in a step (null: it did not run in it) is no
 * score, not a 0: the walk reports only the numbers. */
TEST_IMPL(eval_result_null_scores) {
  static const char json[] =
      "{\"reward\":1,\"done\":false,\"metadata\":{\"rubrics\":"
      "{\"total\":1,\"seq\":0.5,\"seq.judge\":null,\"never\":null}}}";
  char got[256] = "";
  eval_step_t st;
  ASSERT_EQ(eval_step_read(json, sizeof json - 1, &st, collect, got), 0);
  ASSERT_STR_EQ(got, "total=1;seq=0.5;");
}

/* The walk keeps the observation's text (what the policy gets decoded):
 * the whole value, nested or with strings holding brackets, without the
 * blanks around it; none when the result has no observation. */
TEST_IMPL(eval_result_observation) {
  static const struct {
    const char *json, *obs;
  } cases[] = {
      {"{\"observation\":{\"a\":[1,{\"b\":\"}]\"}]},\"done\":false}",
       "{\"a\":[1,{\"b\":\"}]\"}]}"},
      {"{\"done\":false, \"observation\" : \"x\\\"}\" \n}", "\"x\\\"}\""},
      {"{\"reward\":1,\"observation\":  -2.5e3  ,\"done\":true}", "-2.5e3"},
      {"{\"observation\":null}", "null"},
      {"{\"reward\":1,\"done\":false}", NULL},
  };
  size_t i;
  for (i = 0; i < sizeof cases / sizeof *cases; i++) {
    eval_step_t st;
    ASSERT_EQ(eval_step_read(cases[i].json, strlen(cases[i].json), &st, NULL,
                             NULL), 0);
    if (cases[i].obs == NULL) {
      ASSERT_TRUE(st.obs == NULL && st.obs_len == 0);
      continue;
    }
    ASSERT_TRUE(st.obs != NULL);
    ASSERT_EQ(st.obs_len, strlen(cases[i].obs));
    ASSERT_TRUE(memcmp(st.obs, cases[i].obs, st.obs_len) == 0);
  }
}

/* cli/buf.c ends the process through this on out of memory. */
void ludo__cli_error(const char *fmt, ...) {
  (void)fmt;
  abort();
}

/* A result's text as a JSON string (ludo eval's policy argument): every
 * '"', '\\' and control byte escaped wherever it falls in the 8-byte
 * words the escaper reads, other bytes (UTF-8) as they are; appended after
 * what the buffer held, and the buffer kept NUL-terminated. */
TEST_IMPL(cli_json_string) {
  ludo__cli_buf_t b = {0};
  unsigned char in[300];
  char want[2000];
  int t;
  srand(6455);
  for (t = 0; t < 5000; t++) {
    size_t n = (size_t)(rand() % 300), k = 0, i;
    for (i = 0; i < n; i++) {
      int r = rand() % 8;
      in[i] = r == 0   ? '"'
              : r == 1 ? '\\'
              : r == 2 ? (unsigned char)(rand() % 32)
              : r == 3 ? (unsigned char)(0x80 + rand() % 128)
                       : (unsigned char)(' ' + rand() % 95);
    }
    ludo__cli_buf_reset(&b);
    if (t % 2) {
      ludo__cli_buf_add(&b, "[1,", 3);
      memcpy(want, "[1,", 3);
      k = 3;
    }
    want[k++] = '"';
    for (i = 0; i < n; i++) {
      unsigned c = in[i];
      if (c == '"' || c == '\\') {
        want[k++] = '\\';
        want[k++] = (char)c;
      } else if (c < 0x20) {
        k += (size_t)snprintf(want + k, 7, "\\u%04x", c);
      } else {
        want[k++] = (char)c;
      }
    }
    want[k++] = '"';
    ludo__cli_buf_json_stringn(&b, (const char *)in, n);
    ASSERT_EQ(b.len, k);
    ASSERT_TRUE(memcmp(b.p, want, k) == 0);
    ASSERT_TRUE(b.p[b.len] == '\0');
    if (t % 5 == 0) ludo__cli_buf_free(&b); /* from an empty buffer too */
  }
  ludo__cli_buf_free(&b);
}
