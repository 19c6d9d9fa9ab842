/* helpers.c - shared helpers of the C API tests (see helpers.h). */
#include "helpers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

test_alloc_t test_heap = {0, 0, 0, 0, -1, 0, 0, 0};
test_log_t test_log;

/* ---- counting allocator ---------------------------------------------- */

/* Each block starts with a header holding its size; max_align_t keeps the
 * user part aligned as malloc would. */
typedef union {
  size_t size;
  max_align_t align;
} test_hdr_t;

/* memset through a volatile pointer: the store before free() stays. */
static void *(*volatile poison)(void *, int, size_t) = memset;

void *test_alloc_fn(void *ud, void *ptr, size_t osize, size_t nsize) {
  test_alloc_t *a = ud;
  test_hdr_t *h = ptr ? (test_hdr_t *)ptr - 1 : NULL;
  size_t old = h ? h->size : 0;
  if (h != NULL && osize != old) a->osize_mismatch++;
  if (nsize == 0) {
    if (h != NULL) {
      a->live -= old;
      a->blocks--;
      poison(h, 0xa5, sizeof *h + old); /* a use after free reads junk */
      free(h);
    }
    return NULL;
  }
  if (nsize > old) {
    unsigned long n = a->grows++;
    if (a->fail_at >= 0 &&
        (n == (unsigned long)a->fail_at ||
         (a->fail_sticky && n > (unsigned long)a->fail_at))) {
      a->refused++;
      return NULL;
    }
  }
  h = realloc(h, sizeof *h + nsize);
  if (h == NULL) return NULL;
  if (ptr == NULL) a->blocks++;
  h->size = nsize;
  a->live = a->live - old + nsize;
  if (a->live > a->peak) a->peak = a->live;
  return h + 1;
}

/* ---- logger ---------------------------------------------------------- */

static void test_log_cb(void *ud, ludo_log_level_t level, const char *who,
                        const char *msg, size_t len) {
  test_log_t *l = ud;
  size_t n = len < sizeof l->last - 1 ? len : sizeof l->last - 1;
  l->lines++;
  l->last_level = (int)level;
  memcpy(l->last, msg, n);
  l->last[n] = '\0';
  snprintf(l->last_who, sizeof l->last_who, "%s", who ? who : "");
  if (getenv("LUDO_CTEST_VERBOSE") != NULL)
    fprintf(stderr, "[log %d %s] %.*s\n", (int)level, who, (int)len, msg);
}

/* ---- runtimes -------------------------------------------------------- */

void test_options(ludo_options_t *o) {
  ludo_options_init(o);
  o->alloc = test_alloc_fn;
  o->alloc_ud = &test_heap;
  o->log = test_log_cb;
  o->log_ud = &test_log;
}

ludo_runtime_t *test__rt_new(const char *file, int line, ludo_options_t *o) {
  ludo_options_t def;
  ludo_runtime_t *rt = NULL;
  int rc;
  if (o == NULL) {
    test_options(&def);
    o = &def;
  }
  rc = ludo_runtime_new(&rt, o);
  if (rc != 0)
    test__fail(file, line, "ludo_runtime_new failed: %s", ludo_err_name(rc));
  if (rt == NULL) test__fail(file, line, "ludo_runtime_new gave NULL");
  return rt;
}

void test__rt_free(const char *file, int line, ludo_runtime_t *rt) {
  ludo_runtime_free(rt);
  if (test_heap.live != 0 || test_heap.blocks != 0)
    test__fail(file, line, "after ludo_runtime_free: %zu bytes in %zu "
               "blocks still live", test_heap.live, test_heap.blocks);
  if (test_heap.osize_mismatch != 0)
    test__fail(file, line, "the runtime passed a wrong osize %lu times",
               test_heap.osize_mismatch);
}

ludo_env_t *test__env_load(const char *file, int line, ludo_runtime_t *rt,
                           const char *path, const ludo_env_options_t *o) {
  ludo_env_t *env = NULL;
  int rc = ludo_env_load(rt, path, o, &env);
  if (rc != 0)
    test__fail(file, line, "ludo_env_load(%s) failed: %s: %s", path,
               ludo_err_name(rc), ludo_runtime_errmsg(rt));
  if (env == NULL) test__fail(file, line, "ludo_env_load gave NULL");
  return env;
}

ludo_session_t *test__open(const char *file, int line, ludo_env_t *env) {
  ludo_session_t *s = NULL;
  int rc = ludo_session_open(env, &s);
  if (rc != 0)
    test__fail(file, line, "ludo_session_open failed: %s", ludo_err_name(rc));
  if (s == NULL) test__fail(file, line, "ludo_session_open gave NULL");
  return s;
}

/* ---- JSON ------------------------------------------------------------ */

static json_t *parsed[512];
static size_t nparsed;

json_t *test__jparse(const char *file, int line, const char *s, size_t len) {
  json_error_t err;
  json_t *v;
  if (s == NULL) test__fail(file, line, "JPARSE: NULL text");
  v = json_loadb(s, len, JSON_DECODE_ANY, &err);
  if (v == NULL)
    test__fail(file, line, "JPARSE: not JSON (%s at %d:%d): %.*s", err.text,
               err.line, err.column, (int)len, s);
  if (nparsed < sizeof parsed / sizeof parsed[0])
    parsed[nparsed++] = v;
  return v;
}

json_t *test_jfind(json_t *root, const char *path) {
  char key[256];
  const char *p = path;
  json_t *v = root;
  while (v != NULL && *p) {
    const char *slash = strchr(p, '/');
    size_t n = slash ? (size_t)(slash - p) : strlen(p);
    if (n >= sizeof key) return NULL;
    memcpy(key, p, n);
    key[n] = '\0';
    v = json_object_get(v, key);
    p += n + (slash ? 1 : 0);
  }
  return v;
}

json_t *test__jget(const char *file, int line, json_t *root,
                   const char *path) {
  json_t *v = test_jfind(root, path);
  if (v == NULL) {
    char *dump = json_dumps(root, JSON_COMPACT | JSON_ENCODE_ANY);
    char text[1200];
    snprintf(text, sizeof text, "%s", dump ? dump : "?");
    free(dump);
    test__fail(file, line, "JSON has no %s: %s", path, text);
  }
  return v;
}

const char *test__jstr(const char *file, int line, json_t *root,
                       const char *path) {
  json_t *v = test__jget(file, line, root, path);
  if (!json_is_string(v))
    test__fail(file, line, "JSON %s is not a string", path);
  return json_string_value(v);
}

long long test__jint(const char *file, int line, json_t *root,
                     const char *path) {
  json_t *v = test__jget(file, line, root, path);
  if (!json_is_integer(v))
    test__fail(file, line, "JSON %s is not an integer", path);
  return (long long)json_integer_value(v);
}

double test__jnum(const char *file, int line, json_t *root,
                  const char *path) {
  json_t *v = test__jget(file, line, root, path);
  if (!json_is_number(v))
    test__fail(file, line, "JSON %s is not a number", path);
  return json_number_value(v);
}

/* ---- misc ------------------------------------------------------------ */

double test_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void test__cleanup(void) {
  while (nparsed > 0) json_decref(parsed[--nparsed]);
}

ludo_session_t *test__echo_session(const char *file, int line,
                                   ludo_runtime_t **rt) {
  *rt = test__rt_new(file, line, NULL);
  return test__open(file, line,
                    test__env_load(file, line, *rt, "examples/echo", NULL));
}
