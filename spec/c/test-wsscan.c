/* test-wsscan.c - the offsets the streaming JSON parser reports
 * (base/jsonparse.h, cb.offset) and the scan of /ws messages built on them
 * (runtime/serve/wsscan.c): which texts take the fast path, and the bytes
 * of "data" it hands on; every other text is left to jansson. */
#include <stdio.h>
#include <string.h>

#include "base/jsonparse.h"
#include "helpers.h"
#include "serve/internal.h"

/* ---- offsets ---------------------------------------------------------- */

typedef struct trace_s {
  size_t off;
  char log[512]; /* "event@offset " per callback */
} trace_t;

static int put(trace_t *t, const char *ev) {
  size_t n = strlen(t->log);
  snprintf(t->log + n, sizeof t->log - n, "%s@%zu ", ev, t->off);
  return 0;
}

static int t_null(void *ud) { return put(ud, "null"); }
static int t_bool(void *ud, int v) { return put(ud, v ? "true" : "false"); }
static int t_int(void *ud, int64_t v) {
  (void)v;
  return put(ud, "int");
}
static int t_real(void *ud, double v) {
  (void)v;
  return put(ud, "real");
}
static int t_str(void *ud, const char *s, size_t n) {
  (void)s;
  (void)n;
  return put(ud, "str");
}
static int t_key(void *ud, const char *s, size_t n) {
  (void)s;
  (void)n;
  return put(ud, "key");
}
static int t_bo(void *ud) { return put(ud, "{"); }
static int t_eo(void *ud) { return put(ud, "}"); }
static int t_ba(void *ud) { return put(ud, "["); }
static int t_ea(void *ud) { return put(ud, "]"); }
static char *t_scratch(void *ud, size_t n) {
  static char buf[64];
  (void)ud;
  return n <= sizeof buf ? buf : NULL;
}

TEST_IMPL(jsonparse_offsets) {
  /* 0         1         2         3         4
   * 0123456789012345678901234567890123456789012345 */
  static const char text[] =
      " {\"a\": [1, -2.5e0, \"x\\n\"], \"b\" :{}, \"c\":[true,null]}";
  ludo__jsonparse_cb_t cb = {t_null, t_bool, t_int, t_real, t_str,
                             t_key,  t_bo,   t_eo,  t_ba,   t_ea,
                             t_scratch, NULL, NULL, NULL};
  ludo__jsonparse_err_t err;
  trace_t t;
  memset(&t, 0, sizeof t);
  cb.offset = &t.off;
  ASSERT_OK(ludo__jsonparse_run(text, sizeof text - 1, -1, &cb, &t, &err));
  ASSERT_STR_EQ(t.log, "{@1 key@2 [@7 int@8 real@11 str@19 ]@24 key@27 "
                       "{@32 }@33 key@36 [@40 true@41 null@46 ]@50 }@51 ");
  /* A value's bytes, from its begin to one past its end, are the text. */
  ASSERT_EQ(memcmp(text + 7, "[1, -2.5e0, \"x\\n\"]", 24 - 7 + 1), 0);
  /* Without cb.offset nothing is stored. */
  t.off = 12345;
  t.log[0] = '\0';
  cb.offset = NULL;
  ASSERT_OK(ludo__jsonparse_run("[0]", 3, -1, &cb, &t, &err));
  ASSERT_STR_EQ(t.log, "[@12345 int@12345 ]@12345 ");
}

/* ---- the scan of /ws messages ----------------------------------------- */

/* Scans `text`; returns 1 when it takes the fast path, with its type and
 * the data bytes ("" when there is no data object) in the out buffers. */
static int scan(const char *text, char *type, char *data) {
  sv_wsmsg_t m;
  int ok = sv_wsmsg_scan(text, strlen(text), &m);
  type[0] = data[0] = '\0';
  if (!ok) return 0;
  snprintf(type, 16, "%s", m.type);
  if (m.data_object)
    snprintf(data, 256, "%.*s", (int)m.data_len, text + m.data_at);
  else
    ASSERT_EQ(m.data_len, 0);
  if (!m.has_data) ASSERT_EQ(m.data_object, 0);
  return 1;
}

TEST_IMPL(serve_wsscan) {
  static const struct {
    const char *text, *type, *data;
    int has_data;
  } fast[] = {
      {"{\"type\":\"step\",\"data\":{\"message\":\"hi\"}}", "step",
       "{\"message\":\"hi\"}", 1},
      {"{\"data\": { \"a\" : [1, {\"b\": null}], \"c\": \"}\" } ,"
       "\"type\":\"step\"}",
       "step", "{ \"a\" : [1, {\"b\": null}], \"c\": \"}\" }", 1},
      {"{\"type\":\"reset\"}", "reset", "", 0},
      {"{\"type\":\"reset\",\"data\":null}", "reset", "", 1},
      {"{\"type\":\"reset\",\"data\":{}}  ", "reset", "{}", 1},
      {"{\"type\":\"st\\u0061te\"}", "state", "", 0},
      {"{\"type\":\"step\",\"data\":{\"m\":\"\\u00e9\\\"\"}}", "step",
       "{\"m\":\"\\u00e9\\\"\"}", 1},
      {"{\"type\":\"anything\"}", "anything", "", 0},
      {"{\"t\\u0079pe\":\"state\"}", "state", "", 0}, /* as jansson */
  };
  static const char *const slow[] = {
      "",                                     /* not JSON */
      "{oops",                                /* broken */
      " {\"type\":\"state\"}",                /* leading space */
      "[]",                                   /* not an object */
      "\"step\"",
      "{\"data\":{}}",                        /* no type */
      "{\"type\":\"\"}",                      /* empty type */
      "{\"type\":7}",                         /* type not a string */
      "{\"type\":null}",
      "{\"type\":{\"a\":1}}",
      "{\"type\":\"0123456789abcdef\"}",      /* type too long */
      "{\"type\":\"step\",\"data\":[1]}",     /* data not an object */
      "{\"type\":\"step\",\"data\":\"x\"}",
      "{\"type\":\"step\",\"data\":1.5}",
      "{\"type\":\"step\",\"data\":true}",
      "{\"type\":\"step\",\"extra\":1}",      /* another member */
      "{\"type\":\"step\",\"type\":\"state\"}", /* repeated */
      "{\"type\":\"step\",\"data\":{},\"data\":{}}",
      "{\"type\":\"step\",\"data\":{\"m\":\"a\\u0000b\"}}", /* NUL */
      "{\"type\":\"step\",\"data\":{\"a\\u0000\":1}}",
      "{\"type\":\"step\",\"data\":{\"n\":123456789012345678901}}",
      "{\"type\":\"step\",\"data\":{}} x",    /* trailing bytes */
  };
  char type[16], data[256];
  size_t i;
  for (i = 0; i < sizeof fast / sizeof fast[0]; i++) {
    sv_wsmsg_t m;
    if (!scan(fast[i].text, type, data))
      FAIL("not taken: %s", fast[i].text);
    ASSERT_STR_EQ(type, fast[i].type);
    ASSERT_STR_EQ(data, fast[i].data);
    ASSERT_EQ(sv_wsmsg_scan(fast[i].text, strlen(fast[i].text), &m), 1);
    ASSERT_EQ(m.has_data, fast[i].has_data);
  }
  for (i = 0; i < sizeof slow / sizeof slow[0]; i++)
    if (scan(slow[i], type, data)) FAIL("taken: %s", slow[i]);
  /* A long escaped string in data: the scan's scratch is small, so it
   * gives the text to the slow path rather than fail it. */
  {
    char big[1200];
    size_t n = (size_t)snprintf(big, sizeof big,
                                "{\"type\":\"step\",\"data\":{\"m\":\"");
    while (n < 1100) {
      memcpy(big + n, "\\n", 2);
      n += 2;
    }
    snprintf(big + n, sizeof big - n, "\"}}");
    ASSERT_EQ(scan(big, type, data), 0);
  }
}
