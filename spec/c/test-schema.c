/* test-schema.c - compiling the JSON Schemas an untrusted module declares
 * (runtime/script/schema.c), on its own: the compile asks its stop
 * callback (the load's CPU budget) and fails with LUDO_ETIMEOUT when it
 * answers 1, bounds what it holds (max_bytes: the state's memory cap),
 * refuses chains of $refs nested past 512, refuses a $ref whose parts it
 * would have to cut (it resolved to another definition, failing open),
 * resolves many distinct $refs in linear time, and gives every byte back
 * on each failure. */
#include "helpers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "script/schema.h"

static int stops_seen;

static int stop_now(void *ud) {
  (void)ud;
  stops_seen++;
  return 1;
}

static int never_stop(void *ud) {
  (void)ud;
  stops_seen++;
  return 0;
}

/* {"anyOf":[{"$ref":"#/$defs/0"}, ...],"$defs":{"0":{"type":"null"},...}}
 * with `n` distinct definitions; `chain` makes each definition refer to
 * the next one instead (a chain n deep). Caller frees. */
static char *refs_schema(int n, int chain) {
  ludo__buf_t b;
  int i;
  ludo__buf_init(&b, test_alloc_fn, &test_heap);
  ludo__buf_adds(&b, "{\"anyOf\":[");
  for (i = 0; i < (chain ? 1 : n); i++)
    ludo__buf_printf(&b, "%s{\"$ref\":\"#/$defs/%d\"}", i ? "," : "", i);
  ludo__buf_adds(&b, "],\"$defs\":{");
  for (i = 0; i < n; i++) {
    if (chain && i + 1 < n)
      ludo__buf_printf(&b, "%s\"%d\":{\"$ref\":\"#/$defs/%d\"}", i ? "," : "",
                       i, i + 1);
    else
      ludo__buf_printf(&b, "%s\"%d\":{\"type\":\"null\"}", i ? "," : "", i);
  }
  ludo__buf_adds(&b, "}}");
  {
    char *s = strdup(b.p);
    ludo__buf_free(&b);
    return s;
  }
}

/* Compiles `text` within `lim`; returns the code, the message in err. */
static int compile(const char *text, const ludo__schema_limits_t *lim,
                   char *err, size_t n) {
  ludo__alloc_t heap;
  ludo__schema_t *s = NULL;
  int rc;
  ludo__alloc_init(&heap, test_alloc_fn, &test_heap);
  rc = ludo__schema_compile(&heap, text, strlen(text), lim, &s, err, n);
  if (rc == 0) ludo__schema_free(s);
  return rc;
}

TEST_IMPL(schema_compile_stops_and_bounds) {
  char err[512], *text = refs_schema(2000, 0);
  ludo__schema_limits_t lim = {stop_now, NULL, 0};
  size_t live = test_heap.live;
  /* the stop callback ends the compile */
  stops_seen = 0;
  ASSERT_ERR(compile(text, &lim, err, sizeof err), LUDO_ETIMEOUT);
  ASSERT_EQ(stops_seen, 1);
  ASSERT_TRUE(strstr(err, "ETIMEOUT: schema: compiling it was stopped"));
  ASSERT_UINT_EQ(test_heap.live, live);
  /* asked every few hundred subschemas while it answers 0 */
  lim.stop = never_stop;
  stops_seen = 0;
  ASSERT_OK(compile(text, &lim, err, sizeof err));
  ASSERT_GE(stops_seen, 4000 / 256 - 1);
  /* what the compile holds is bounded: the tree, then the nodes */
  lim.max_bytes = 64 << 10;
  ASSERT_ERR(compile(text, &lim, err, sizeof err), LUDO_ENOMEM);
  ASSERT_TRUE(strstr(err, "ENOMEM: schema: its tree would hold more than"));
  ASSERT_UINT_EQ(test_heap.live, live);
  lim.max_bytes = 8 << 20;
  ASSERT_OK(compile(text, &lim, err, sizeof err));
  free(text);
  /* 20,000 distinct $refs: resolved through a table, not a list walked
   * once per $ref (which took minutes at 120,000) */
  text = refs_schema(20000, 0);
  ASSERT_OK(compile(text, NULL, err, sizeof err));
  free(text);
  ASSERT_UINT_EQ(test_heap.live, live);
}

TEST_IMPL(schema_compile_refuses_deep_and_cut_refs) {
  char err[512], *text, big[1200];
  size_t live = test_heap.live;
  /* a chain of $refs past 512 (it overflowed the C stack at 30,000) */
  text = refs_schema(600, 1);
  ASSERT_ERR(compile(text, NULL, err, sizeof err), LUDO_EPARSE);
  ASSERT_TRUE(strstr(err, "subschemas nest more than 512 deep"));
  free(text);
  text = refs_schema(400, 1);
  ASSERT_OK(compile(text, NULL, err, sizeof err));
  free(text);
  /* a $ref part longer than 255 bytes is refused, not cut to another
   * definition's name */
  snprintf(big, sizeof big,
           "{\"properties\":{\"x\":{\"$ref\":\"#/$defs/%0300d\"}},"
           "\"$defs\":{\"%0255d\":{\"type\":\"integer\"},"
           "\"%0300d\":{\"type\":\"string\"}}}", 0, 0, 0);
  ASSERT_ERR(compile(big, NULL, err, sizeof err), LUDO_EPARSE);
  ASSERT_TRUE(strstr(err, "a part of it is longer than 255 bytes"));
  ASSERT_UINT_EQ(test_heap.live, live);
}
