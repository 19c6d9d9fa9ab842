/* test-sources.c - the files require and the environment loader read
 * (docs/sandbox.md, "Source files"): a file's real path must stay in the
 * folder it was found in (the environment's, a script's, a root of the
 * module path), it must be a regular file of at most 16 MiB, and a
 * refused one is an ELOAD naming the module and why, at once, and never
 * what the file holds. The folders are made at test time:
 *
 *   TOP/secret.lua   return "<SECRET>"   (outside every folder below)
 *   TOP/secret.env   API_KEY=<SECRET>    (not Lua: a load error quotes it)
 *   TOP/env/         env.lua requires action.mod and reports the outcome
 *     out.lua -> ../secret.lua      dotenv.lua -> TOP/secret.env
 *     zero.lua -> /dev/zero         fifo.lua: a FIFO
 *     big.lua: 16 MiB + 1 (sparse)  dir.lua/: a folder
 *     loop.lua -> loop.lua          inside.lua -> sub/real.lua (allowed)
 *   TOP/bad/env.lua -> ../secret.lua
 *   TOP/root/lua/evil.lua -> ../../secret.lua (a root of the module path)
 *   TOP/root/lua/fine.lua -> ../share/fine.lua (inside the root)
 *   TOP/env/huge.lua: 10 MiB (sparse), under the size limit */
#include "helpers.h"

#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SECRET "s3cr3t-0f-the-h0st"

#define ENV_LUA                                                          \
  "local env = { action = 'any', observation = 'any' }\n"                \
  "function env.reset() return {} end\n"                                 \
  "function env.step(a)\n"                                               \
  "  local ok, v = pcall(require, a.mod)\n"                              \
  "  return { ok = ok, v = tostring(v) }\n"                              \
  "end\n"                                                                \
  "return env\n"

static char top[] = "/tmp/ludo-ct-sources-XXXXXX";

static void put(const char *rel, const char *text) {
  char path[256];
  FILE *f;
  snprintf(path, sizeof path, "%s/%s", top, rel);
  f = fopen(path, "w");
  ASSERT_NOT_NULL(f);
  fputs(text, f);
  ASSERT_EQ(fclose(f), 0);
}

static void link_to(const char *target, const char *rel) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", top, rel);
  ASSERT_EQ(symlink(target, path), 0);
}

static void folder(const char *rel) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", top, rel);
  ASSERT_EQ(mkdir(path, 0700), 0);
}

static void make_tree(void) {
  char path[256];
  ASSERT_NOT_NULL(mkdtemp(top));
  put("secret.lua", "return \"" SECRET "\"\n");
  put("secret.env", "API_KEY=" SECRET "\n");
  folder("env");
  folder("env/sub");
  folder("env/dir.lua");
  put("env/env.lua", ENV_LUA);
  put("env/sub/real.lua", "return 'inside'\n");
  link_to("sub/real.lua", "env/inside.lua");
  link_to("../secret.lua", "env/out.lua");
  snprintf(path, sizeof path, "%s/secret.env", top);
  link_to(path, "env/dotenv.lua");
  link_to("/dev/zero", "env/zero.lua");
  link_to("loop.lua", "env/loop.lua");
  snprintf(path, sizeof path, "%s/env/fifo.lua", top);
  ASSERT_EQ(mkfifo(path, 0600), 0);
  snprintf(path, sizeof path, "%s/env/big.lua", top);
  put("env/big.lua", "");
  ASSERT_EQ(truncate(path, (16 << 20) + 1), 0);
  snprintf(path, sizeof path, "%s/env/huge.lua", top);
  put("env/huge.lua", "");
  ASSERT_EQ(truncate(path, 10 << 20), 0);
  folder("bad");
  link_to("../secret.lua", "bad/env.lua");
  folder("root");
  folder("root/lua");
  folder("root/share");
  put("root/share/fine.lua", "return 'fine'\n");
  link_to("../share/fine.lua", "root/lua/fine.lua");
  link_to("../../secret.lua", "root/lua/evil.lua");
}

static int remove_one(const char *path, const struct stat *sb, int flag,
                      struct FTW *ftw) {
  (void)sb; (void)flag; (void)ftw;
  return remove(path);
}

static void remove_tree(void) {
  ASSERT_EQ(nftw(top, remove_one, 16, FTW_DEPTH | FTW_PHYS), 0);
}

/* A runtime whose module path is TOP/root (and nothing else), with a
 * memory cap of `cap` bytes per session (0: the default). */
static ludo_runtime_t *sources_rt(size_t cap) {
  char root[128];
  ludo_options_t o;
  snprintf(root, sizeof root, "%s/root", top);
  test_options(&o);
  o.module_path = root;
  o.cpu_budget_ms = 2000;
  if (cap) o.memory_cap = cap;
  return test_rt_new(&o);
}

/* Requires `mod` in s; returns the text require gave (the value or the
 * error), in buf. Asserts it took less than 5 s (a FIFO blocked for
 * ever) and whether it loaded. */
static const char *require_in(ludo_session_t *s, const char *mod, int ok,
                              char *buf, size_t n) {
  char action[128];
  const char *out;
  size_t len;
  json_t *obs;
  double t0 = test_now();
  snprintf(action, sizeof action, "{\"mod\":\"%s\"}", mod);
  ASSERT_OK(ludo_session_step(s, action, strlen(action), &out, &len));
  ASSERT_DBL_LT(test_now() - t0, 5.0);
  obs = JGET(JPARSE(out, len), "observation");
  ASSERT_EQ(json_is_true(JGET(obs, "ok")), ok);
  snprintf(buf, n, "%s", JSTR(obs, "v"));
  return buf;
}

/* Requires `mod`, expects it refused for `why`, without SECRET. */
static void expect_refused(ludo_session_t *s, const char *mod,
                           const char *why) {
  char buf[1024], head[128];
  const char *msg = require_in(s, mod, 0, buf, sizeof buf);
  snprintf(head, sizeof head, "ELOAD: module '%s': ", mod);
  ASSERT_STR_CONTAINS(msg, head);
  ASSERT_STR_CONTAINS(msg, " refused: ");
  ASSERT_STR_CONTAINS(msg, why);
  ASSERT_NULL(strstr(msg, SECRET));
}

/* require in the environment's folder and in a root of the module path:
 * every way out or into something that is not a plain file is refused;
 * a link that stays inside its folder loads. */
TEST_IMPL(sources_require_confined) {
  ludo_runtime_t *rt;
  ludo_session_t *s;
  char path[128], buf[256];
  make_tree();
  rt = sources_rt(0);
  snprintf(path, sizeof path, "%s/env", top);
  s = test_open(test_env_load(rt, path, NULL));
  ASSERT_OK(ludo_session_reset(s, J("{}"), NULL, NULL));
  expect_refused(s, "out", "leads outside");
  expect_refused(s, "dotenv", "leads outside");
  expect_refused(s, "zero", "leads outside");
  expect_refused(s, "fifo", "it is a FIFO, not a regular file");
  expect_refused(s, "dir", "it is a directory, not a regular file");
  expect_refused(s, "big", "it has 16777217 bytes, more than the 16 MiB");
  expect_refused(s, "loop", "symbolic links");
  expect_refused(s, "evil", "leads outside");
  ASSERT_STR_EQ(require_in(s, "inside", 1, buf, sizeof buf), "inside");
  ASSERT_STR_EQ(require_in(s, "fine", 1, buf, sizeof buf), "fine");
  /* a refusal is the module's error on every require, and nothing of
   * the refused file was cached under another name */
  expect_refused(s, "out", "leads outside");
  ludo_session_close(s);
  test_rt_free(rt);
  remove_tree();
}

/* The environment's own file and a script's modules follow the same
 * rule: env.lua leading out of its folder fails the load. */
TEST_IMPL(sources_env_and_script_confined) {
  ludo_runtime_t *rt;
  ludo_env_t *env;
  ludo_script_t *sc = NULL;
  char path[128];
  make_tree();
  rt = sources_rt(0);
  snprintf(path, sizeof path, "%s/bad", top);
  ASSERT_ERR(ludo_env_load(rt, path, NULL, &env), LUDO_ELOAD);
  ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "env.lua refused: it leads "
                      "outside");
  ASSERT_NULL(strstr(ludo_runtime_errmsg(rt), SECRET));
  snprintf(path, sizeof path, "%s/env", top);
  ASSERT_ERR(ludo_script_open(rt, "dotenv", path, &sc), LUDO_ELOAD);
  ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "module 'dotenv': ");
  ASSERT_NULL(strstr(ludo_runtime_errmsg(rt), SECRET));
  ASSERT_ERR(ludo_script_open(rt, "fifo", path, &sc), LUDO_ELOAD);
  ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "it is a FIFO");
  test_rt_free(rt);
  remove_tree();
}

/* An environment whose env.lua is there but is no regular file (a FIFO,
 * a link to /dev/zero, a folder), or a path to such a file, is ELOAD
 * saying so, at once: not "has no env.lua", and never a read that
 * blocks or never ends. */
TEST_IMPL(sources_env_file_not_regular) {
  static const char *const dirs[] = {"fifoenv", "zeroenv", "dirofenv"};
  ludo_runtime_t *rt;
  ludo_env_t *env;
  char path[160];
  size_t i;
  make_tree();
  for (i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s/%s", top, dirs[i]);
    ASSERT_OK(mkdir(path, 0700));
  }
  snprintf(path, sizeof path, "%s/fifoenv/env.lua", top);
  ASSERT_OK(mkfifo(path, 0600));
  snprintf(path, sizeof path, "%s/zeroenv/env.lua", top);
  ASSERT_OK(symlink("/dev/zero", path));
  snprintf(path, sizeof path, "%s/dirofenv/env.lua", top);
  ASSERT_OK(mkdir(path, 0700));
  rt = sources_rt(0);
  for (i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s/%s", top, dirs[i]);
    ASSERT_ERR(ludo_env_load(rt, path, NULL, &env), LUDO_ELOAD);
    ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "env.lua is not a "
                        "regular file");
  }
  snprintf(path, sizeof path, "%s/fifoenv/env.lua", top);
  ASSERT_ERR(ludo_env_load(rt, path, NULL, &env), LUDO_ELOAD);
  ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "is not a regular file");
  test_rt_free(rt);
  remove_tree();
}

/* A file under the size limit is read into the session's own memory, so
 * it counts against the session's cap: with 4 MiB, a 10 MiB module fails
 * with a memory error and the runtime's heap never holds its 10 MiB
 * (the runtime read it into a buffer of its own first, outside the cap:
 * /dev/zero grew that buffer to 1 GB). */
TEST_IMPL(sources_read_under_the_cap) {
  ludo_runtime_t *rt;
  ludo_session_t *s;
  char path[128], buf[256];
  size_t before;
  make_tree();
  rt = sources_rt((size_t)4 << 20);
  snprintf(path, sizeof path, "%s/env", top);
  s = test_open(test_env_load(rt, path, NULL));
  ASSERT_OK(ludo_session_reset(s, J("{}"), NULL, NULL));
  before = test_heap.live;
  test_heap.peak = before;
  ASSERT_STR_CONTAINS(require_in(s, "huge", 0, buf, sizeof buf),
                      "not enough memory");
  ASSERT_LT(test_heap.peak - before, (size_t)6 << 20);
  ASSERT_STR_EQ(require_in(s, "inside", 1, buf, sizeof buf), "inside");
  ludo_session_close(s);
  test_rt_free(rt);
  remove_tree();
}
