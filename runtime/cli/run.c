/* run.c - `ludo run ENV`: runs episodes in-process with a Lua policy. */
#include <errno.h>
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "cli/cli.h"
#include "ludo.h"
#include "script/json.h"
#include "script/modules.h"
#include "script/state.h"

static const char run_usage[] =
    "usage: ludo run ENV [--episodes N] [--seed S] [--policy FILE.lua]\n"
    "                    [--max-steps N] [--json]\n"
    "\n"
    "Runs episodes of the environment at ENV (a folder with env.lua, or a\n"
    ".lua file) in-process. Each episode: reset, then step with actions\n"
    "from the policy until done or --max-steps.\n"
    "\n"
    "  --episodes N    episodes to run (default 1)\n"
    "  --seed S        reset seed of episode k is S+k-1 (the policy is\n"
    "                  seeded the same way); without it, runs are random\n"
    "  --policy FILE   Lua module returning act(observation) -> action, or\n"
    "                  a table {act=..., reset=...}; default: random actions\n"
    "                  drawn from the action schema\n"
    "  --max-steps N   stop an episode after N steps (default 100)\n"
    "  --json          print one JSON object per episode\n";

typedef struct {
  ludo__alloc_t heap;
  ludo__codecache_t cache;
  ludo__registry_t cmods;
  ludo__modules_t modules;
  ludo__state_t st;
  int policy_ref;
} policy_t;

static int parse_count(const char *opt, const char *s, long long min,
                       long long *out) {
  char *end;
  long long v;
  errno = 0;
  v = strtoll(s, &end, 10);
  if (errno != 0 || *s == '\0' || *end != '\0' || v < min) {
    ludo__cli_error("%s expects an integer >= %lld, got '%s'", opt, min, s);
    return -1;
  }
  *out = v;
  return 0;
}

/* Calls policy.<fn> with `nargs` arguments already pushed; leaves nres. */
static int policy_call(policy_t *p, const char *fn, int nargs, int nres) {
  lua_State *L = p->st.L;
  int rc;
  lua_rawgeti(L, LUA_REGISTRYINDEX, p->policy_ref);
  lua_getfield(L, -1, fn);
  lua_remove(L, -2);
  lua_insert(L, -1 - nargs);
  ludo__state_arm(&p->st, 10000000000ull, 0);
  ludo__state_run_begin(&p->st, L, 0);
  rc = ludo__state_pcall(&p->st, L, nargs, nres);
  ludo__state_run_end(&p->st);
  ludo__state_disarm(&p->st, NULL);
  if (rc != 0) {
    ludo__cli_error("policy: %s", lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  return rc;
}

/* Protected: loads and runs the policy file. [-0, +1, e] */
static int load_policy_file(lua_State *L) {
  ludo__modules_t *m = lua_touserdata(L, 1);
  const char *file = lua_tostring(L, 2);
  ludo__modules_loadfile(L, m, file);
  lua_call(L, 0, 1);
  return 1;
}

static int policy_open(policy_t *p, const char *root, const char *file,
                       const char *info) {
  lua_State *L;
  char *slash;
  memset(p, 0, sizeof *p);
  ludo__alloc_init(&p->heap, NULL, NULL);
  if (ludo__codecache_init(&p->cache, &p->heap, root) != 0) return -1;
  ludo__registry_init(&p->cmods, &p->heap);
  if (ludo__registry_add(&p->cmods, "ludo.json", luaopen_ludo_json, NULL))
    return -1;
  p->modules.cache = &p->cache;
  p->modules.global = &p->cmods;
  if (file != NULL) {
    p->modules.dir = ludo__strndup(&p->heap, file, strlen(file));
    if (p->modules.dir == NULL) return -1;
    slash = strrchr(p->modules.dir, '/');
    if (slash) *slash = '\0'; else strcpy(p->modules.dir, ".");
  }
  p->st.heap = &p->heap;
  p->st.cap = (size_t)64 << 20;
  p->st.who = "policy";
  p->st.modules = &p->modules;
  if (ludo__state_open(&p->st) != 0) return -1;
  L = p->st.L;
  lua_getglobal(L, "require");
  lua_pushliteral(L, "ludo.policy");
  if (ludo__state_pcall(&p->st, L, 1, 1) != 0) {
    ludo__cli_error("policy: %s", lua_tostring(L, -1));
    return -1;
  }
  p->policy_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  if (file != NULL) {
    lua_pushcfunction(L, load_policy_file);
    lua_pushlightuserdata(L, &p->modules);
    lua_pushstring(L, file);
    if (ludo__state_pcall(&p->st, L, 2, 1) != 0) {
      ludo__cli_error("policy %s: %s", file, lua_tostring(L, -1));
      return -1;
    }
  } else {
    lua_pushnil(L);
  }
  lua_pushstring(L, info);
  return policy_call(p, "init", 2, 0) == 0 ? 0 : -1;
}

static void policy_close(policy_t *p) {
  ludo__state_close(&p->st);
  if (p->modules.dir)
    ludo__free(&p->heap, p->modules.dir, strlen(p->modules.dir) + 1);
  ludo__codecache_free(&p->cache);
  ludo__registry_free(&p->cmods);
}

/* Feeds a result to the policy: reward and done out. */
static int observe(policy_t *p, const char *json, size_t len, double *reward,
                   int *has_reward, int *done) {
  lua_State *L = p->st.L;
  lua_pushlstring(L, json, len);
  if (policy_call(p, "observe", 1, 2) != 0) return -1;
  *has_reward = lua_isnumber(L, -2);
  *reward = *has_reward ? lua_tonumber(L, -2) : 0.0;
  *done = lua_toboolean(L, -1);
  lua_pop(L, 2);
  return 0;
}

int ludo__cli_run(int argc, char **argv) {
  const char *env_path = NULL, *policy_file = NULL, *root;
  long long episodes = 1, seed = -1, max_steps = 100;
  int as_json = 0, i, rc, failures = 0;
  ludo_options_t opts;
  ludo_runtime_t *rt = NULL;
  ludo_env_t *env = NULL;
  policy_t pol;
  size_t info_len;
  const char *info;
  double sum_reward = 0;
  for (i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      fputs(run_usage, stdout);
      return 0;
    } else if (strcmp(a, "--json") == 0) {
      as_json = 1;
    } else if (strcmp(a, "--episodes") == 0 || strcmp(a, "--seed") == 0 ||
               strcmp(a, "--policy") == 0 || strcmp(a, "--max-steps") == 0) {
      if (i + 1 >= argc) {
        ludo__cli_error("%s needs a value (see ludo run --help)", a);
        return LUDO__CLI_USAGE;
      }
      if (strcmp(a, "--policy") == 0) {
        policy_file = argv[++i];
      } else if (strcmp(a, "--episodes") == 0) {
        if (parse_count(a, argv[++i], 1, &episodes)) return LUDO__CLI_USAGE;
      } else if (strcmp(a, "--seed") == 0) {
        if (parse_count(a, argv[++i], 0, &seed)) return LUDO__CLI_USAGE;
      } else if (parse_count(a, argv[++i], 1, &max_steps)) {
        return LUDO__CLI_USAGE;
      }
    } else if (a[0] == '-') {
      ludo__cli_error("unknown option '%s' (see ludo run --help)", a);
      return LUDO__CLI_USAGE;
    } else if (env_path == NULL) {
      env_path = a;
    } else {
      ludo__cli_error("unexpected argument '%s' (one ENV only)", a);
      return LUDO__CLI_USAGE;
    }
  }
  if (env_path == NULL) {
    ludo__cli_error("run needs an environment (see ludo run --help)");
    return LUDO__CLI_USAGE;
  }
  root = ludo__cli_root();
  ludo_options_init(&opts);
  opts.module_path = root;
  opts.prewarm = 1;
  if ((rc = ludo_runtime_new(&rt, &opts)) != 0) {
    ludo__cli_error("cannot start: %s", ludo_strerror(rc));
    return 1;
  }
  if ((rc = ludo_env_load(rt, env_path, NULL, &env)) != 0) {
    ludo__cli_error("%s", ludo_runtime_errmsg(rt));
    ludo_runtime_free(rt);
    return 1;
  }
  info = ludo_env_info(env, &info_len);
  if (policy_open(&pol, root, policy_file, info) != 0) {
    policy_close(&pol);
    ludo_runtime_free(rt);
    return 1;
  }
  for (i = 0; i < episodes; i++) {
    ludo_session_t *s;
    const char *out;
    size_t out_len;
    char reset_json[64];
    long long steps = 0;
    double total = 0, r;
    int has_r, done = 0, err = 0;
    if ((rc = ludo_session_open(env, &s)) != 0) {
      ludo__cli_error("%s", ludo_runtime_errmsg(rt));
      failures++;
      break;
    }
    if (seed >= 0)
      snprintf(reset_json, sizeof reset_json, "{\"seed\":%lld}", seed + i);
    else
      strcpy(reset_json, "{}");
    rc = ludo_session_reset(s, reset_json, strlen(reset_json), &out,
                            &out_len);
    if (rc == 0) {
      lua_State *L = pol.st.L;
      if (seed >= 0) lua_pushinteger(L, seed + i); else lua_pushnil(L);
      lua_pushlstring(L, out, out_len);
      if (policy_call(&pol, "reset", 2, 0) != 0 ||
          observe(&pol, out, out_len, &r, &has_r, &done) != 0)
        err = 1;
    } else {
      ludo__cli_error("episode %d: reset: %s", i + 1,
                      ludo_session_errmsg(s));
      err = 1;
    }
    while (!err && !done && steps < max_steps) {
      size_t alen;
      const char *action;
      if (policy_call(&pol, "act", 0, 1) != 0) {
        err = 1;
        break;
      }
      action = lua_tolstring(pol.st.L, -1, &alen);
      rc = ludo_session_step(s, action, alen, &out, &out_len);
      lua_pop(pol.st.L, 1);
      if (rc != 0) {
        ludo__cli_error("episode %d: step %lld: %s", i + 1, steps + 1,
                        ludo_session_errmsg(s));
        err = 1;
        break;
      }
      steps++;
      if (observe(&pol, out, out_len, &r, &has_r, &done) != 0) {
        err = 1;
        break;
      }
      if (has_r) total += r;
    }
    if (as_json)
      printf("{\"episode\":%d,\"session\":\"%s\",\"steps\":%lld,"
             "\"total_reward\":%.17g,\"done\":%s,\"error\":%s}\n",
             i + 1, ludo_session_id(s), steps, total,
             done ? "true" : "false", err ? "true" : "false");
    else
      printf("episode %d: %lld steps, total reward %.4g%s%s\n", i + 1, steps,
             total, done ? ", done" : ", not done (max steps)",
             err ? ", FAILED" : "");
    sum_reward += total;
    failures += err;
    ludo_session_close(s);
  }
  if (!as_json)
    printf("%lld episodes, mean reward %.4g\n", episodes,
           sum_reward / (double)episodes);
  policy_close(&pol);
  ludo_runtime_free(rt);
  return failures ? 1 : 0;
}
