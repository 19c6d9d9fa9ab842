/* json_bench.c - the cost of JSON text -> Lua -> JSON text, per document,
 * for the value layer (runtime/script/json.c on base/jsonparse.c) and two
 * baselines measured in the same run:
 *
 *   ludo      ludo__json_decode (parser callbacks build Lua values) and
 *             ludo__json_encode (Lua values straight into a buffer)
 *   old       the previous path: jansson json_loadb, the tree copied into
 *             Lua, then ludo__json_encode
 *   jansson   json_loadb + json_dumps, no Lua at all
 *
 * Documents: the echo action {"message":"hello world"} and a 1 KB nested
 * observation. Each figure is the median of 7 rounds of N iterations.
 *
 * usage: ludo-json-bench [N]   (default 200000) */
#include <jansson.h>
#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "script/json.h"

#define ROUNDS 7

static const char array_mt_key = 'a'; /* registry: ludo.json's array_mt */

static const char echo_doc[] = "{\"message\":\"hello world\"}";

/* About 1 KB: nesting, arrays, integers, reals, escapes, unicode. */
static const char nested_doc[] =
    "{\"observation\":{\"board\":[\"#########\",\"#..G....#\",\"#.##.##.#\","
    "\"#...A...#\",\"#########\"],\"agent\":{\"x\":4,\"y\":3,\"dir\":"
    "\"north\",\"health\":0.875,\"alive\":true},\"inventory\":[{\"item\":"
    "\"key\",\"count\":1,\"weight\":0.25},{\"item\":\"torch\",\"count\":3,"
    "\"weight\":1.5},{\"item\":\"map\",\"count\":1,\"weight\":0.05}],"
    "\"scores\":[0.5,1.25,-0.03,12.0,3.14159,2.71828,1e-05,6.02e+23],"
    "\"visible\":[[0,1,0,0,1],[1,1,0,1,0],[0,0,1,0,0]],\"note\":\"line one"
    "\\nline \\\"two\\\" caf\\u00e9 \\ud83d\\ude00\",\"last\":null},"
    "\"reward\":0.75,\"done\":false,\"truncated\":false,\"metadata\":{"
    "\"step\":128,\"episode\":7,\"seed\":1234567890123,\"rubrics\":{"
    "\"total\":0.75,\"length\":0.6,\"non_empty\":1.0,\"printable\":1.0},"
    "\"history\":[{\"action\":\"up\",\"reward\":0.0},{\"action\":\"left\","
    "\"reward\":0.25},{\"action\":\"left\",\"reward\":0.5},{\"action\":"
    "\"down\",\"reward\":-0.25}],\"tags\":[\"grid\",\"maze\",\"small\","
    "\"deterministic\"],\"limits\":{\"max_steps\":200,\"cpu_ms\":100,"
    "\"memory\":16777216},\"text\":\"Lorem ipsum dolor sit amet, consectetur "
    "adipiscing elit, sed do eiusmod tempor incididunt ut labore.\"}}";

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* A Lua state where ludo.json works: ludo.null comes from a preload, so
 * the bench runs from any directory. */
static lua_State *new_state(void) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  if (luaL_dostring(L, "package.preload['ludo.null'] = function() return "
                       "setmetatable({}, {__name = 'ludo.null'}) end") !=
      LUA_OK) {
    fprintf(stderr, "json_bench: %s\n", lua_tostring(L, -1));
    exit(1);
  }
  ludo__json_setup(L);
  /* The old path needs the array metatable: ludo.json hands it out. */
  luaopen_ludo_json(L);
  lua_getfield(L, -1, "array_mt");
  lua_rawsetp(L, LUA_REGISTRYINDEX, &array_mt_key);
  lua_pop(L, 1);
  return L;
}

/* ---- the old path: a jansson tree copied into Lua -------------------- */

static void push_tree(lua_State *L, json_t *v) {
  const char *k;
  json_t *item;
  size_t i;
  switch (json_typeof(v)) {
    case JSON_OBJECT:
      lua_createtable(L, 0, (int)json_object_size(v));
      json_object_foreach(v, k, item) {
        lua_pushstring(L, k);
        push_tree(L, item);
        lua_rawset(L, -3);
      }
      break;
    case JSON_ARRAY:
      lua_createtable(L, (int)json_array_size(v), 0);
      json_array_foreach(v, i, item) {
        push_tree(L, item);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
      }
      lua_rawgetp(L, LUA_REGISTRYINDEX, &array_mt_key);
      lua_setmetatable(L, -2);
      break;
    case JSON_STRING:
      lua_pushlstring(L, json_string_value(v), json_string_length(v));
      break;
    case JSON_INTEGER:
      lua_pushinteger(L, (lua_Integer)json_integer_value(v));
      break;
    case JSON_REAL:
      lua_pushnumber(L, json_real_value(v));
      break;
    case JSON_TRUE:
    case JSON_FALSE:
      lua_pushboolean(L, json_is_true(v));
      break;
    default:
      ludo__json_pushnull(L);
  }
}

/* ---- the three ways, one iteration each ------------------------------ */

typedef struct {
  lua_State *L;
  ludo__buf_t out;
  const char *doc;
  size_t len;
} ctx_t;

static void run_ludo(ctx_t *c) {
  ludo__json_decode(c->L, c->doc, c->len, LUDO__JSON_MAXDEPTH);
  ludo__buf_reset(&c->out);
  ludo__json_encode(c->L, -1, &c->out, LUDO__JSON_MAXDEPTH, NULL);
  lua_pop(c->L, 1);
}

static void run_old(ctx_t *c) {
  json_t *root = json_loadb(c->doc, c->len, JSON_DECODE_ANY, NULL);
  push_tree(c->L, root);
  json_decref(root);
  ludo__buf_reset(&c->out);
  ludo__json_encode(c->L, -1, &c->out, LUDO__JSON_MAXDEPTH, NULL);
  lua_pop(c->L, 1);
}

static void run_jansson(ctx_t *c) {
  json_t *root = json_loadb(c->doc, c->len, JSON_DECODE_ANY, NULL);
  char *text = json_dumps(root, JSON_COMPACT | JSON_ENCODE_ANY);
  free(text);
  json_decref(root);
}

/* Median ns per iteration of `fn` over ROUNDS rounds of n. */
static double measure(void (*fn)(ctx_t *), ctx_t *c, long n) {
  double t[ROUNDS];
  int r;
  long i;
  for (i = 0; i < n / 10 + 1; i++) fn(c); /* warm up */
  for (r = 0; r < ROUNDS; r++) {
    double t0 = now_ns();
    for (i = 0; i < n; i++) fn(c);
    t[r] = (now_ns() - t0) / (double)n;
  }
  qsort(t, ROUNDS, sizeof t[0], cmp_d);
  return t[ROUNDS / 2];
}

static void bench_doc(const char *name, const char *doc, long n) {
  ctx_t c;
  double ludo, old, jans;
  c.L = new_state();
  c.doc = doc;
  c.len = strlen(doc);
  ludo__buf_init(&c.out, ludo__alloc_default, NULL);
  ludo = measure(run_ludo, &c, n);
  old = measure(run_old, &c, n);
  jans = measure(run_jansson, &c, n);
  printf("%-8s %6zu B  ludo %8.0f ns/op  old %8.0f ns/op (%.2fx)  "
         "jansson %8.0f ns/op (%.2fx)\n",
         name, c.len, ludo, old, old / ludo, jans, jans / ludo);
  ludo__buf_free(&c.out);
  lua_close(c.L);
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 200000;
  if (n <= 0) n = 200000;
  printf("decode + encode, median of %d rounds of %ld; (Nx) = baseline "
         "time / ludo time\n", ROUNDS, n);
  bench_doc("echo", echo_doc, n);
  bench_doc("nested", nested_doc, n / 10 > 0 ? n / 10 : 1);
  return 0;
}
