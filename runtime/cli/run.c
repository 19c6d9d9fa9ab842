/* run.c - `ludo run ENV`: runs episodes with a Lua policy, in-process, or
 * against an OpenEnv server when ENV is its URL (ludo's client). */
#include <errno.h>
#include <stddef.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "ludo.h"

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
  ludo__cli_buf_t obs;  /* the last result's observation (JSON), if any */
  int has_obs;
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
  ludo__cli_buf_free(&p->obs);
}

/* Reads reward (number or null) and done from a result, and keeps its
 * observation's text for the policy's next call. */
static void read_result(policy_t *pol, const char *json, size_t len,
                        double *reward, int *has_reward, int *done) {
  json_t *root = json_loadb(json, len, 0, NULL);
  json_t *r = root ? json_object_get(root, "reward") : NULL;
  json_t *o = root ? json_object_get(root, "observation") : NULL;
  char *t = o ? json_dumps(o, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
  *has_reward = r != NULL && json_is_number(r);
  *reward = *has_reward ? json_number_value(r) : 0.0;
  *done = root != NULL && json_is_true(json_object_get(root, "done"));
  ludo__cli_buf_reset(&pol->obs);
  if (t != NULL) ludo__cli_buf_add(&pol->obs, t, strlen(t));
  pol->has_obs = t != NULL;
  free(t);
  json_decref(root);
}

/* What `ludo run` was asked to do. */
typedef struct {
  const char *env_path, *policy_file, *trace_path, *host_lib, *token;
  long long episodes, seed, max_steps, budget_ms, cap_mb;
  int as_json, verbose, strict, no_host_lib, allow_client, allow_llm;
  int remote;                  /* env_path is a server's URL */
  FILE *trace;
} run_args_t;

enum {
  OPT_EPISODES = 2, OPT_SEED, OPT_POLICY, OPT_MAX_STEPS, OPT_CPU_BUDGET,
  OPT_MEMORY_CAP, OPT_JSON, OPT_TRACE, OPT_VERBOSE, OPT_STRICT,
  OPT_NO_STRICT, OPT_HOST_LIB, OPT_NO_HOST_LIB, OPT_TOKEN, OPT_ALLOW_CLIENT,
  OPT_ALLOW_LLM
};

static const ludo__cli_opt_t run_opts[] = {
    {OPT_EPISODES, "--episodes", NULL, "N", "episodes to run (default 1)"},
    {OPT_SEED, "--seed", NULL, "S",
     "reset seed of episode k is S+k-1 (the policy is\n"
     "seeded the same way); without it, runs are random"},
    {OPT_POLICY, "--policy", NULL, "FILE",
     "Lua module returning act(observation) -> action,\n"
     "or a table {act=..., reset=...}; default: random\n"
     "actions drawn from the action schema"},
    {OPT_MAX_STEPS, "--max-steps", NULL, "N",
     "stop an episode after N steps (default 100)"},
    LUDO__CLI_CPU_BUDGET_ENTRY(OPT_CPU_BUDGET),
    {OPT_MEMORY_CAP, "--memory-cap", NULL, "MB",
     "memory cap of each session's Lua state, and of\n"
     "the policy's, in MiB (default 64)"},
    {OPT_STRICT, "--strict", NULL, NULL,
     "check every observation (reset and step) against\n"
     "the environment's observation schema; one that\n"
     "does not match fails its episode with ESCHEMA,\n"
     "naming the call and the field (the default)"},
    {OPT_NO_STRICT, "--no-strict", NULL, NULL,
     "do not check observations"},
    {OPT_HOST_LIB, "--host-lib", NULL, "PATH",
     "load the host library PATH (a .so exporting\n"
     "ludo_host_init, see ludo.h) before the\n"
     "environment, instead of the one its manifest.json\n"
     "names; native code, run with your rights"},
    {OPT_NO_HOST_LIB, "--no-host-lib", NULL, NULL,
     "never load native code: fail when the\n"
     "environment's manifest.json names a host library"},
    LUDO__CLI_TOKEN_ENTRY(OPT_TOKEN),
    {OPT_ALLOW_CLIENT, "--allow-client", NULL, NULL,
     "let the policy require(\"ludo.client\") and reach\n"
     "OpenEnv servers over the network (off: the\n"
     "policy stays sandboxed)"},
    {OPT_ALLOW_LLM, "--allow-llm", NULL, NULL,
     "let the policy and the environment's rubrics\n"
     "(LLM judges) require(\"ludo.llm\") and call LLM\n"
     "APIs over HTTP (docs/llm.md; off by default)"},
    {OPT_JSON, "--json", NULL, NULL, "print one JSON object per episode"},
    {OPT_TRACE, "--trace", NULL, "FILE",
     "write one JSON line per reset and step (episode,\n"
     "step, action, observation, reward, done, metadata\n"
     "with the rubric scores by name) to FILE, or to\n"
     "stdout for -"},
    {OPT_VERBOSE, "--verbose", "-v", NULL,
     "show print()/ludo.log output of the environment\n"
     "and the policy, each line prefixed by episode and\n"
     "session"},
    LUDO__CLI_HELP_ENTRY,
    {0, NULL, NULL, NULL, NULL}};

/* The numeric options: where each goes, its bounds. */
typedef struct {
  int id;
  size_t offset;
  long long min, max;
} num_opt_t;

static const num_opt_t num_opts[] = {
    {OPT_EPISODES, offsetof(run_args_t, episodes), 1, 1000000000},
    {OPT_SEED, offsetof(run_args_t, seed), 0, 1LL << 62},
    {OPT_MAX_STEPS, offsetof(run_args_t, max_steps), 1, 1000000000},
    {OPT_CPU_BUDGET, offsetof(run_args_t, budget_ms), 1, 86400000},
    {OPT_MEMORY_CAP, offsetof(run_args_t, cap_mb), 1, 65536},
    {0, 0, 0, 0}};

/* The name an option id has in the table, for messages. */
static const char *opt_name(int id) {
  const ludo__cli_opt_t *o;
  for (o = run_opts; o->id != 0 && o->id != id; o++) {
  }
  return o->id ? o->name : "?";
}

/* Applies option `id` with value `val`. Returns 0 or the exit status. */
static int apply(void *ud, int id, const char *val) {
  run_args_t *ra = ud;
  const num_opt_t *n;
  for (n = num_opts; n->id != 0 && n->id != id; n++) {
  }
  if (n->id != 0) {
    long long *dst = (long long *)((char *)ra + n->offset);
    if (parse_count(opt_name(id), val, n->min, dst)) return LUDO__CLI_USAGE;
    if (*dst > n->max) {
      ludo__cli_error("%s is at most %lld", opt_name(id), n->max);
      return LUDO__CLI_USAGE;
    }
    return 0;
  }
  switch (id) {
    case OPT_POLICY: ra->policy_file = val; break;
    case OPT_TRACE: ra->trace_path = val; break;
    case OPT_HOST_LIB: ra->host_lib = val; break;
    case OPT_JSON: ra->as_json = 1; break;
    case OPT_VERBOSE: ra->verbose = 1; break;
    case OPT_STRICT: ra->strict = 1; break;
    case OPT_NO_STRICT: ra->strict = 0; break;
    case OPT_NO_HOST_LIB: ra->no_host_lib = 1; break;
    case OPT_TOKEN: ra->token = val; break;
    case OPT_ALLOW_CLIENT: ra->allow_client = 1; break;
    case OPT_ALLOW_LLM: ra->allow_llm = 1; break;
    default: break;
  }
  return 0;
}

/* Parses argv into *ra. Returns -1 to go on, or the exit status. */
static int parse_args(const ludo__cli_cmd_t *cmd, int argc, char **argv,
                      run_args_t *ra) {
  int rc;
  memset(ra, 0, sizeof *ra);
  ra->episodes = 1;
  ra->seed = -1;
  ra->max_steps = 100;
  ra->budget_ms = 10000;
  ra->cap_mb = 64;
  ra->strict = 1;
  ra->token = getenv("LUDO_TOKEN");
  rc = ludo__cli_parse(cmd, argc, argv, apply, ra, &ra->env_path, "ENV",
                       "an environment");
  if (rc >= 0) return rc;
  if (ra->host_lib != NULL && ra->no_host_lib) {
    ludo__cli_error("--host-lib and --no-host-lib contradict each other");
    return LUDO__CLI_USAGE;
  }
  ra->remote = strncmp(ra->env_path, "http://", 7) == 0 ||
               strncmp(ra->env_path, "https://", 8) == 0 ||
               strncmp(ra->env_path, "ws://", 5) == 0 ||
               strncmp(ra->env_path, "wss://", 6) == 0;
  if (ra->remote && ra->host_lib != NULL) {
    ludo__cli_error("--host-lib loads native code for a local environment, "
                    "not for a server at %s", ra->env_path);
    return LUDO__CLI_USAGE;
  }
  return -1;
}

/* Where episodes run: a session of this process, or a server's (through
 * one client, whose reset reconnects after a lost connection). */
typedef struct {
  ludo_session_t *s;
  ludo_client_t *c;
} target_t;

static int target_reset(target_t *t, const char *json, size_t len,
                        const char **out, size_t *out_len) {
  return t->c ? ludo_client_reset(t->c, json, len, out, out_len)
              : ludo_session_reset(t->s, json, len, out, out_len);
}

static int target_step(target_t *t, const char *json, size_t len,
                       const char **out, size_t *out_len) {
  return t->c ? ludo_client_step(t->c, json, len, out, out_len)
              : ludo_session_step(t->s, json, len, out, out_len);
}

static const char *target_errmsg(const target_t *t) {
  return t->c ? ludo_client_errmsg(t->c) : ludo_session_errmsg(t->s);
}

/* One episode's outcome. */
typedef struct {
  long long steps;
  double total;
  int done, err;
  char why[512];               /* the error, first line, when err */
} episode_t;

/* Keeps the first line of `msg` as the episode's error. */
static void episode_fail(episode_t *ep, const char *msg) {
  size_t n = strcspn(msg, "\n");
  ep->err = 1;
  snprintf(ep->why, sizeof ep->why, "%.*s", (int)n, msg);
}

/* Writes one trace line: the step's action and its result's fields. */
static void trace_step(const run_args_t *ra, int i, long long step,
                       const char *action, size_t alen, const char *out,
                       size_t out_len) {
  if (ra->trace == NULL || out_len < 2 || out[0] != '{') return;
  fprintf(ra->trace, "{\"episode\":%d,\"step\":%lld,\"action\":%.*s,%.*s\n",
          i + 1, step, (int)alen, action, (int)(out_len - 1), out + 1);
}

/* Resets the session and tells the policy. */
static int episode_reset(const run_args_t *ra, int i, target_t *s,
                         policy_t *pol, const char **out, size_t *out_len,
                         episode_t *ep) {
  char reset_json[64];
  double r;
  int has_r;
  if (ra->seed >= 0)
    snprintf(reset_json, sizeof reset_json, "{\"seed\":%lld}", ra->seed + i);
  else
    strcpy(reset_json, "{}");
  if (target_reset(s, reset_json, strlen(reset_json), out, out_len)) {
    episode_fail(ep, target_errmsg(s));
    ludo__cli_error("episode %d: reset: %s", i + 1, target_errmsg(s));
    return -1;
  }
  trace_step(ra, i, 0, "null", 4, *out, *out_len);
  ludo__cli_buf_reset(&pol->args);
  if (ra->seed >= 0)
    ludo__cli_buf_printf(&pol->args, "[%lld,%.*s]", ra->seed + i,
                         (int)*out_len, *out);
  else
    ludo__cli_buf_printf(&pol->args, "[null,%.*s]", (int)*out_len, *out);
  read_result(pol, *out, *out_len, &r, &has_r, &ep->done);
  if (policy_call(pol, "reset", NULL, NULL) != 0) {
    episode_fail(ep, ludo_script_errmsg(pol->sc));
    return -1;
  }
  return 0;
}

/* One step: the policy's action for the last result, then the step. */
static int episode_step(const run_args_t *ra, int i, target_t *s,
                        policy_t *pol, const char **out, size_t *out_len,
                        double *r, int *has_r, episode_t *ep) {
  const char *action;
  size_t alen;
  /* [step, reward, error, the last result's text, its observation]:
   * act_text decodes the rest of the result only when the policy reads
   * context.result. (No step follows a result that is done.) */
  ludo__cli_buf_reset(&pol->args);
  ludo__cli_buf_printf(&pol->args, "[%lld,", ep->steps);
  if (*has_r)
    ludo__cli_buf_printf(&pol->args, "%.17g,null,", *r);
  else
    ludo__cli_buf_add(&pol->args, "null,null,", 10);
  ludo__cli_buf_json_stringn(&pol->args, *out, *out_len);
  if (pol->has_obs) {
    ludo__cli_buf_add(&pol->args, ",", 1);
    ludo__cli_buf_add(&pol->args, pol->obs.p, pol->obs.len);
  }
  ludo__cli_buf_add(&pol->args, "]", 1);
  if (policy_call(pol, "act_text", &action, &alen) != 0) {
    episode_fail(ep, ludo_script_errmsg(pol->sc));
    return -1;
  }
  if (target_step(s, action, alen, out, out_len) != 0) {
    episode_fail(ep, target_errmsg(s));
    ludo__cli_error("episode %d: step %lld: %s", i + 1, ep->steps + 1,
                    target_errmsg(s));
    return -1;
  }
  ep->steps++;
  trace_step(ra, i, ep->steps, action, alen, *out, *out_len);
  read_result(pol, *out, *out_len, r, has_r, &ep->done);
  if (*has_r) ep->total += *r;
  return 0;
}

static void print_episode(const run_args_t *ra, int i, const target_t *t,
                          const episode_t *ep) {
  if (ra->as_json) {
    ludo__cli_buf_t total = {0};
    ludo__cli_buf_t why = {0};
    if (ep->err)
      ludo__cli_buf_json_string(&why, ep->why);
    else
      ludo__cli_buf_printf(&why, "null");
    ludo__cli_buf_t sid = {0};
    ludo__cli_buf_json_real(&total, ep->total);
    if (t->s != NULL)
      ludo__cli_buf_json_string(&sid, ludo_session_id(t->s));
    else
      ludo__cli_buf_printf(&sid, "null"); /* the server's, unknown here */
    printf("{\"episode\":%d,\"session\":%s,\"steps\":%lld,"
           "\"total_reward\":%s,\"done\":%s,\"failed\":%s,\"error\":%s}\n",
           i + 1, sid.p, ep->steps, total.p,
           ep->done ? "true" : "false", ep->err ? "true" : "false", why.p);
    ludo__cli_buf_free(&total);
    ludo__cli_buf_free(&why);
    ludo__cli_buf_free(&sid);
  } else if (ep->err) {
    printf("episode %d: FAILED after %lld steps: ", i + 1, ep->steps);
    ludo__cli_put_text(stdout, ep->why);
    putchar('\n');
  } else {
    printf("episode %d: %lld steps, total reward %.4g%s\n", i + 1,
           ep->steps, ep->total,
           ep->done ? ", done" : ", not done (max steps)");
  }
}

/* Runs episode i on a new session, or on the server's through `c`.
 * Returns -1 when no session opens. */
static int run_episode(const run_args_t *ra, int i, ludo_env_t *env,
                       ludo_client_t *c, ludo_runtime_t *rt, policy_t *pol,
                       episode_t *ep) {
  target_t t = {NULL, c};
  const char *out = NULL;
  size_t out_len = 0;
  double r = 0;
  int has_r = 0;
  memset(ep, 0, sizeof *ep);
  if (c == NULL && ludo_session_open(env, &t.s) != 0) {
    ludo__cli_error("%s", ludo_runtime_errmsg(rt));
    return -1;
  }
  if (t.s != NULL && ludo_session_set_strict(t.s, ra->strict) != 0) {
    ludo__cli_error("cannot set strict mode"); /* (a fresh session) */
    ludo_session_close(t.s);
    return -1;
  }
  ep->err = episode_reset(ra, i, &t, pol, &out, &out_len, ep) != 0;
  while (!ep->err && !ep->done && ep->steps < ra->max_steps)
    ep->err = episode_step(ra, i, &t, pol, &out, &out_len, &r, &has_r,
                           ep) != 0;
  print_episode(ra, i, &t, ep);
  ludo_session_close(t.s);
  return 0;
}

/* The episode being run, for -v's line prefixes. */
static int current_episode;

/* -v: every log line of the sessions and the policy, on stderr, named
 * after the episode and the session (or the policy). */
static void verbose_log(void *ud, ludo_log_level_t level, const char *who,
                        const char *msg, size_t len) {
  (void)ud;
  (void)level;
  if (strcmp(who, "ludo.policy") == 0)
    fprintf(stderr, "[episode %d policy] %.*s\n", current_episode,
            (int)len, msg);
  else
    fprintf(stderr, "[episode %d session %.8s] %.*s\n", current_episode,
            who, (int)len, msg);
}

/* The runtime (with the environment's host library), the environment
 * (or a client of the server at its URL) and the policy of a run. */
static int open_run(const run_args_t *ra, ludo__cli_hostlib_t *lib,
                    ludo_runtime_t **rt, ludo_env_t **env, ludo_client_t **c,
                    policy_t *pol) {
  ludo_options_t opts;
  ludo_client_options_t copts;
  const char *info;
  size_t info_len;
  int rc;
  ludo_options_init(&opts);
  if (ra->verbose) {
    opts.log = verbose_log;
    opts.log_ud = (void *)ra;
  }
  opts.module_path = ludo__cli_root();
  opts.prewarm = 1;
  opts.cpu_budget_ms = (uint32_t)ra->budget_ms;
  opts.memory_cap = (size_t)ra->cap_mb << 20;
  if (ra->allow_client) opts.lua_client = LUDO_LUA_CLIENT_SCRIPTS;
  if (ra->allow_llm)
    opts.lua_llm = LUDO_LUA_LLM_SCRIPTS | LUDO_LUA_LLM_SESSIONS;
  if (ra->remote) {
    if ((rc = ludo_runtime_new(rt, &opts)) != 0) {
      ludo__cli_error("cannot start: %s", ludo_strerror(rc));
      return -1;
    }
    ludo_client_options_init(&copts);
    copts.token = ra->token && *ra->token ? ra->token : NULL;
    if (ludo_client_connect(*rt, ra->env_path, &copts, c) != 0) {
      ludo__cli_error("%s", ludo_runtime_errmsg(*rt));
      return -1;
    }
    if (ludo_client_info(*c, &info, &info_len) != 0) {
      ludo__cli_error("%s", ludo_client_errmsg(*c));
      return -1;
    }
    return policy_open(pol, *rt, ra->policy_file, info, info_len);
  }
  if (ludo__cli_hostlib_open(lib, ra->env_path, ra->host_lib,
                             ra->no_host_lib) != 0)
    return -1;
  if ((rc = ludo_runtime_new(rt, &opts)) != 0) {
    ludo__cli_error("cannot start: %s", ludo_strerror(rc));
    return -1;
  }
  if (ludo__cli_hostlib_init(lib, *rt) != 0) return -1;
  if (ludo_env_load(*rt, ra->env_path, NULL, env) != 0) {
    ludo__cli_error("%s", ludo_runtime_errmsg(*rt));
    return -1;
  }
  info = ludo_env_info(*env, &info_len);
  return policy_open(pol, *rt, ra->policy_file, info, info_len);
}

/* Frees what open_run made, the host library last (the runtime's
 * states hold its functions until the runtime is freed). */
static void close_run(ludo__cli_hostlib_t *lib, ludo_runtime_t *rt,
                      ludo_client_t *c, policy_t *pol) {
  policy_close(pol);
  ludo_client_close(c);
  ludo_runtime_free(rt);
  ludo__cli_hostlib_close(lib);
}

static int cmd_run(const ludo__cli_cmd_t *cmd, int argc, char **argv) {
  run_args_t ra;
  ludo__cli_hostlib_t lib;
  ludo_runtime_t *rt = NULL;
  ludo_env_t *env = NULL;
  ludo_client_t *c = NULL;
  policy_t pol;
  double sum_reward = 0;
  int i, failures = 0, rc = parse_args(cmd, argc, argv, &ra);
  if (rc >= 0) return rc;
  memset(&pol, 0, sizeof pol);
  memset(&lib, 0, sizeof lib);
  if (open_run(&ra, &lib, &rt, &env, &c, &pol) != 0) {
    close_run(&lib, rt, c, &pol);
    return 1;
  }
  if (ra.trace_path != NULL) {
    ra.trace = strcmp(ra.trace_path, "-") == 0 ? stdout
                                               : fopen(ra.trace_path, "w");
    if (ra.trace == NULL) {
      ludo__cli_error("--trace: cannot write %s", ra.trace_path);
      close_run(&lib, rt, c, &pol);
      return 1;
    }
  }
  for (i = 0; i < ra.episodes; i++) {
    episode_t ep;
    current_episode = i + 1;
    if (run_episode(&ra, i, env, c, rt, &pol, &ep) != 0) {
      failures++;
      break;
    }
    if (ep.err)
      failures++;
    else
      sum_reward += ep.total;
  }
  if (!ra.as_json) {
    long long done = ra.episodes - failures;
    printf("%lld episodes, %d failed, mean reward %.4g%s\n", ra.episodes,
           failures, done > 0 ? sum_reward / (double)done : 0.0,
           failures > 0 ? " (over the episodes that did not fail)" : "");
  }
  if (ra.trace != NULL && ra.trace != stdout) fclose(ra.trace);
  close_run(&lib, rt, c, &pol);
  return failures ? 1 : 0;
}

const ludo__cli_cmd_t ludo__cli_cmd_run = {
    "run", "ENV [options]", "run episodes with a Lua policy",
    "Runs episodes of the environment at ENV (a folder with env.lua, or a\n"
    ".lua file) in-process, or of the OpenEnv server at ENV when it is a\n"
    "URL (http://HOST:PORT or ws://HOST:PORT/ws; ludo serve or OpenEnv's\n"
    "own). Each episode: reset, then step with actions from the policy\n"
    "until done or --max-steps.\n",
    run_opts,
    "An episode that fails (an error in the environment, its rubric or the\n"
    "policy, or with --strict an observation off its schema) is reported\n"
    "with its error and left out of the mean; the exit status is 1 when any\n"
    "episode failed, 2 for a usage error.\n"
    "\n"
    "Host library: an environment whose host modules are C (see ludo.h)\n"
    "names a shared object in ENV/manifest.json, {\"host_lib\": \"x.so\"}:\n"
    "a path relative to ENV, or a file name looked up in ENV and then next\n"
    "to this ludo binary. It is loaded before the environment.\n"
    "\n"
    "Against a server, the environment's description comes from its\n"
    "/metadata and /schema, the episodes share one connection (a lost one\n"
    "fails its episode; the next reset connects again), --strict,\n"
    "--cpu-budget and --memory-cap concern the policy only (the server has\n"
    "its own; ludo serve --strict), and --json reports \"session\": null.\n",
    cmd_run};
