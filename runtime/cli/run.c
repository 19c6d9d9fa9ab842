/* run.c - `ludo run ENV`: runs episodes in-process with a Lua policy. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "ludo.h"

static const char run_usage[] =
    "usage: ludo run ENV [--episodes N] [--seed S] [--policy FILE.lua]\n"
    "                    [--max-steps N] [--cpu-budget MS]\n"
    "                    [--memory-cap MB] [--json]\n"
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
    "  --cpu-budget MS CPU time each call (and the policy's) may run, in\n"
    "                  milliseconds (default 10000)\n"
    "  --memory-cap MB memory cap of each session's Lua state, and of the\n"
    "                  policy's, in MiB (default 64)\n"
    "  --json          print one JSON object per episode\n";

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

/* The policy: ludo.policy as a script, wrapping the user's module. */
typedef struct {
  ludo_script_t *sc;
  ludo__cli_buf_t args;
} policy_t;

/* Calls ludo.policy.<fn> with the JSON array `args`; prints failures. */
static int policy_call(policy_t *p, const char *fn, const char **out,
                       size_t *len) {
  const char *o;
  size_t n;
  int rc = ludo_script_call(p->sc, fn, p->args.p, p->args.len, &o, &n);
  if (rc != 0) {
    ludo__cli_error("policy: %s", ludo_script_errmsg(p->sc));
    return rc;
  }
  if (out) *out = o;
  if (len) *len = n;
  return 0;
}

/* Splits FILE.lua into its folder and module name. */
static int policy_module(const char *file, char *dir, size_t dn, char *mod,
                         size_t mn) {
  const char *slash = strrchr(file, '/'), *base = slash ? slash + 1 : file;
  size_t blen = strlen(base);
  if (blen > 4 && strcmp(base + blen - 4, ".lua") == 0) blen -= 4;
  if (blen == 0 || blen >= mn) return -1;
  memcpy(mod, base, blen);
  mod[blen] = '\0';
  if (slash == NULL)
    snprintf(dir, dn, ".");
  else
    snprintf(dir, dn, "%.*s", (int)(slash - file), file);
  return 0;
}

static int policy_open(policy_t *p, ludo_runtime_t *rt, const char *file,
                       const char *info, size_t info_len) {
  char dir[4096], mod[256];
  int rc;
  memset(p, 0, sizeof *p);
  if (file != NULL &&
      policy_module(file, dir, sizeof dir, mod, sizeof mod) != 0) {
    ludo__cli_error("policy %s: not a Lua file name", file);
    return -1;
  }
  rc = ludo_script_open(rt, "ludo.policy", file ? dir : NULL, &p->sc);
  if (rc != 0) {
    ludo__cli_error("policy: %s", ludo_runtime_errmsg(rt));
    return -1;
  }
  ludo__cli_buf_printf(&p->args, "[");
  if (file != NULL)
    ludo__cli_buf_json_string(&p->args, mod);
  else
    ludo__cli_buf_printf(&p->args, "null");
  ludo__cli_buf_printf(&p->args, ",%.*s]", (int)info_len, info);
  return policy_call(p, "init", NULL, NULL) == 0 ? 0 : -1;
}

static void policy_close(policy_t *p) {
  ludo_script_free(p->sc);
  ludo__cli_buf_free(&p->args);
}

/* Reads reward (number or null) and done from a result. */
static void read_result(const char *json, size_t len, double *reward,
                        int *has_reward, int *done) {
  json_t *root = json_loadb(json, len, 0, NULL);
  json_t *r = root ? json_object_get(root, "reward") : NULL;
  *has_reward = r != NULL && json_is_number(r);
  *reward = *has_reward ? json_number_value(r) : 0.0;
  *done = root != NULL && json_is_true(json_object_get(root, "done"));
  json_decref(root);
}

int ludo__cli_run(int argc, char **argv) {
  const char *env_path = NULL, *policy_file = NULL, *root;
  long long episodes = 1, seed = -1, max_steps = 100, budget = 10000;
  long long cap_mb = 64;
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
               strcmp(a, "--policy") == 0 || strcmp(a, "--max-steps") == 0 ||
               strcmp(a, "--cpu-budget") == 0 ||
               strcmp(a, "--memory-cap") == 0) {
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
      } else if (strcmp(a, "--cpu-budget") == 0) {
        if (parse_count(a, argv[++i], 1, &budget) || budget > 86400000)
          return LUDO__CLI_USAGE;
      } else if (strcmp(a, "--memory-cap") == 0) {
        if (parse_count(a, argv[++i], 1, &cap_mb) || cap_mb > 65536)
          return LUDO__CLI_USAGE;
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
  opts.cpu_budget_ms = (uint32_t)budget;
  opts.memory_cap = (size_t)cap_mb << 20;
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
  if (policy_open(&pol, rt, policy_file, info, info_len) != 0) {
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
      ludo__cli_buf_reset(&pol.args);
      if (seed >= 0)
        ludo__cli_buf_printf(&pol.args, "[%lld,%.*s]", seed + i,
                             (int)out_len, out);
      else
        ludo__cli_buf_printf(&pol.args, "[null,%.*s]", (int)out_len, out);
      read_result(out, out_len, &r, &has_r, &done);
      if (policy_call(&pol, "reset", NULL, NULL) != 0) err = 1;
    } else {
      ludo__cli_error("episode %d: reset: %s", i + 1,
                      ludo_session_errmsg(s));
      err = 1;
    }
    while (!err && !done && steps < max_steps) {
      size_t alen;
      const char *action;
      ludo__cli_buf_reset(&pol.args);
      ludo__cli_buf_printf(&pol.args, "[%.*s,{\"step\":%lld,\"done\":%s",
                           (int)out_len, out, steps, done ? "true" : "false");
      if (has_r) ludo__cli_buf_printf(&pol.args, ",\"reward\":%.17g", r);
      ludo__cli_buf_printf(&pol.args, "}]");
      if (policy_call(&pol, "act", &action, &alen) != 0) {
        err = 1;
        break;
      }
      rc = ludo_session_step(s, action, alen, &out, &out_len);
      if (rc != 0) {
        ludo__cli_error("episode %d: step %lld: %s", i + 1, steps + 1,
                        ludo_session_errmsg(s));
        err = 1;
        break;
      }
      steps++;
      read_result(out, out_len, &r, &has_r, &done);
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
