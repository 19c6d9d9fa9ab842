/* eval_config.c - `ludo eval`'s configuration: the flags, the run file
 * (read by ludo.eval.runfile in a sandboxed script), the defaults, and the
 * run.json that records them. Flags override the run file's fields. */
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <uv.h>

#include "cli/eval.h"

enum {
  OPT_POLICY = 2, OPT_EPISODES, OPT_SEED, OPT_CONCURRENCY, OPT_OUT,
  OPT_MAX_STEPS, OPT_NO_TRAJ, OPT_QUIET, OPT_SHARD, OPT_CPU_BUDGET,
  OPT_MEMORY_CAP, OPT_TOKEN, OPT_RESUME, OPT_REPEATS, OPT_WORKERS
};

const ludo__cli_opt_t ludo__cli_eval_opts[] = {
    {OPT_POLICY, "--policy", NULL, "FILE",
     "a Lua policy module, as `ludo run` takes it\n"
     "(default: the run file's, else random actions)"},
    {OPT_EPISODES, "--episodes", NULL, "N",
     "run N seeded episodes (default 1 without tasks)"},
    {OPT_REPEATS, "--repeats", NULL, "N",
     "episodes per task (default 1)"},
    {OPT_SEED, "--seed", NULL, "S",
     "the run's seed; episode i is seeded from S and i\n"
     "(default 0)"},
    {OPT_CONCURRENCY, "--concurrency", NULL, "C",
     "episodes in flight at once (default 8 per CPU,\n"
     "at most 256)"},
    {OPT_WORKERS, "--workers", NULL, "N",
     "spread the episodes over N worker processes, each\n"
     "with C/N of the concurrency: N cores (default 1)"},
    {OPT_OUT, "--out", NULL, "DIR",
     "the output folder (default eval-out)"},
    {OPT_MAX_STEPS, "--max-steps", NULL, "N",
     "truncate an episode after N steps (default 100)"},
    {OPT_RESUME, "--resume", NULL, NULL,
     "go on with the run in DIR: run only the episodes\n"
     "it has no result for (and the cancelled ones)"},
    {OPT_SHARD, "--shard", NULL, "I/N",
     "run the I-th (from 0) of N disjoint slices of the\n"
     "episodes: those whose index % N == I"},
    {OPT_NO_TRAJ, "--no-trajectories", NULL, NULL,
     "do not write trajectories/"},
    {OPT_QUIET, "--quiet", "-q", NULL, "no progress line"},
    LUDO__CLI_CPU_BUDGET_ENTRY(OPT_CPU_BUDGET),
    {OPT_MEMORY_CAP, "--memory-cap", NULL, "MB",
     "memory cap of each session's and policy's Lua\n"
     "state, in MiB (default 64)"},
    LUDO__CLI_TOKEN_ENTRY(OPT_TOKEN),
    LUDO__CLI_HELP_ENTRY,
    {0, NULL, NULL, NULL, NULL}};

/* What the flags said; numbers -1 and strings NULL when not given. */
typedef struct {
  const char *policy, *out, *token;
  long long episodes, repeats, seed, concurrency, max_steps, budget, cap;
  long long workers;
  long long shard_i, shard_n;
  int resume, no_traj, quiet;
} flags_t;

/* A decimal number of at most 7 digits, no sign, space or leading zero,
 * ending at `stop`; its end, or NULL. */
static const char *shard_number(const char *v, char stop, long long *out) {
  const char *p = v;
  *out = 0;
  while (*p >= '0' && *p <= '9' && p - v < 8) *out = *out * 10 + (*p++ - '0');
  if (p == v || *p != stop || p - v > 7 || (v[0] == '0' && p - v > 1))
    return NULL;
  return p;
}

static int shard_parse(const char *arg, flags_t *f) {
  const char *v = arg;
  long long i, n;
  if ((v = shard_number(v, '/', &i)) == NULL ||
      shard_number(v + 1, '\0', &n) == NULL || n < 1 || i >= n)
    goto bad;
  if (n > 1000000) {
    ludo__cli_error("--shard %s: at most 1000000 shards", arg);
    return LUDO__CLI_USAGE;
  }
  f->shard_i = i;
  f->shard_n = n;
  return 0;
bad:
  ludo__cli_error("--shard takes I/N, two decimal numbers with 0 <= I < N "
                  "(got '%s')", arg);
  return LUDO__CLI_USAGE;
}

static int apply_number(int id, const char *v, flags_t *f) {
  switch (id) {
    case OPT_EPISODES:
      return ludo__cli_number("--episodes", v, 1, 1000000000, &f->episodes);
    case OPT_REPEATS:
      return ludo__cli_number("--repeats", v, 1, 1000000, &f->repeats);
    case OPT_SEED:
      return ludo__cli_number("--seed", v, 0, (1LL << 53) - 1, &f->seed);
    case OPT_CONCURRENCY:
      return ludo__cli_number("--concurrency", v, 1, 100000,
                              &f->concurrency);
    case OPT_WORKERS:
      return ludo__cli_number("--workers", v, 1, 256, &f->workers);
    case OPT_MAX_STEPS:
      return ludo__cli_number("--max-steps", v, 1, 1000000000,
                              &f->max_steps);
    case OPT_CPU_BUDGET:
      return ludo__cli_number("--cpu-budget", v, 1, 86400000, &f->budget);
    case OPT_MEMORY_CAP:
      return ludo__cli_number("--memory-cap", v, 1, 65536, &f->cap);
    default:
      return -1;
  }
}

static int apply(void *ud, int id, const char *v) {
  flags_t *f = ud;
  int rc = apply_number(id, v, f);
  if (rc != -1) return rc;
  switch (id) {
    case OPT_POLICY: f->policy = v; break;
    case OPT_OUT:
      if (*v == '\0') {
        ludo__cli_error("--out takes a folder (got an empty name)");
        return LUDO__CLI_USAGE;
      }
      f->out = v;
      break;
    case OPT_TOKEN: f->token = v; break;
    case OPT_RESUME: f->resume = 1; break;
    case OPT_NO_TRAJ: f->no_traj = 1; break;
    case OPT_QUIET: f->quiet = 1; break;
    case OPT_SHARD: return shard_parse(v, f);
    default: break;
  }
  return 0;
}

/* ---- the run file ------------------------------------------------------ */

static int is_url(const char *s) {
  return strncmp(s, "ws://", 5) == 0 || strncmp(s, "http://", 7) == 0 ||
         strncmp(s, "wss://", 6) == 0 || strncmp(s, "https://", 8) == 0;
}

/* A run file is a regular file named *.lua (an environment is a folder
 * or a URL; a single-file environment is named by a run file's env). */
static int names_lua(const char *arg) {
  size_t n = strlen(arg);
  return n > 4 && strcmp(arg + n - 4, ".lua") == 0;
}

static int is_runfile(const char *arg) {
  struct stat sb;
  return names_lua(arg) && stat(arg, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* An error message's first line (a Lua traceback follows it). */
static int first_line(const char *m) { return (int)strcspn(m, "\n"); }

/* Splits FILE.lua into its folder and module name. */
static int split_module(const char *file, char *dir, size_t dn, char *mod,
                        size_t mn) {
  const char *slash = strrchr(file, '/'), *base = slash ? slash + 1 : file;
  size_t blen = strlen(base);
  if (blen > 4 && strcmp(base + blen - 4, ".lua") == 0) blen -= 4;
  if (blen == 0 || blen >= mn || strchr(base, '.') != base + blen) return -1;
  memcpy(mod, base, blen);
  mod[blen] = '\0';
  if (slash == NULL)
    snprintf(dir, dn, ".");
  else
    snprintf(dir, dn, "%.*s", (int)(slash - file), file);
  return 0;
}

/* Reads the run file's fields with ludo.eval.runfile (new ref). */
static json_t *runfile_read(const eval_cfg_t *cfg, const char *path) {
  ludo_runtime_t *rt = NULL;
  ludo_script_t *sc = NULL;
  ludo__cli_buf_t args = {0};
  json_t *out = NULL;
  json_error_t jerr;
  const char *o;
  size_t n;
  ludo_options_t opts;
  ludo_options_init(&opts);
  opts.module_path = ludo__cli_root();
  opts.prewarm = 0;
  if (ludo_runtime_new(&rt, &opts) != 0) return NULL;
  if (ludo_script_open(rt, "ludo.eval.runfile", cfg->runfile_dir, &sc)) {
    const char *m = ludo_runtime_errmsg(rt);
    ludo__cli_error("%s: %.*s", path, first_line(m), m);
  } else {
    ludo__cli_buf_printf(&args, "[");
    ludo__cli_buf_json_string(&args, cfg->runfile_mod);
    ludo__cli_buf_printf(&args, "]");
    if (ludo_script_call(sc, "load", args.p, args.len, &o, &n) != 0) {
      const char *m = ludo_script_errmsg(sc);
      ludo__cli_error("%s: %.*s", path, first_line(m), m);
    } else if ((out = json_loadb(o, n, 0, &jerr)) == NULL) {
      ludo__cli_error("%s: the run file's fields cannot be read (%s; a "
                      "string holding a NUL byte?)", path, jerr.text);
    }
  }
  ludo__cli_buf_free(&args);
  ludo_script_free(sc);
  ludo_runtime_free(rt);
  return out;
}

/* A path of the run file's, relative to its folder. */
static void resolve(const eval_cfg_t *cfg, const char *p, char *dst,
                    size_t n) {
  if (p[0] == '/' || is_url(p) || cfg->runfile_dir[0] == '\0')
    snprintf(dst, n, "%s", p);
  else if ((size_t)snprintf(dst, n, "%.2000s/%.2000s", cfg->runfile_dir, p) >=
           n)
    dst[0] = '\0';
}

static long long num_or(json_t *o, const char *k, long long flag,
                        long long def) {
  json_t *v = json_object_get(o, k);
  if (flag >= 0) return flag;
  return json_is_integer(v) ? json_integer_value(v) : def;
}

/* ---- resolving --------------------------------------------------------- */

/* A local path made absolute (symbolic links followed), so run.json names
 * the same code whatever folder ludo eval was started from; a path that
 * does not exist stays as given (loading it says why). */
static void canonical(char *path, size_t n) {
  char real[PATH_MAX];
  if (is_url(path) || realpath(path, real) == NULL) return;
  snprintf(path, n, "%s", real);
}

/* run.json's code.policy: the Lua files of the folder of the file that
 * defines the policy (`file`, in `dir`), what its require can load: an
 * edit of a module it requires is another run, as one of the file is.
 * Returns 0, or -1 after saying why it cannot be taken. */
static int policy_code(eval_cfg_t *cfg, const char *file, const char *dir) {
  if (eval_digest_lua(dir, cfg->policy_digest) == 0) return 0;
  ludo__cli_error("policy %s: cannot read the Lua files of its folder %s "
                  "(unreadable, or more than 10,000 Lua files or 200,000 "
                  "entries), which run.json's code must describe: put the "
                  "policy in a folder of its own", file, dir);
  return -1;
}

static int set_policy(eval_cfg_t *cfg, const flags_t *f, json_t *rf) {
  json_t *p = json_object_get(rf, "policy");
  const char *kind = json_string_value(json_object_get(p, "kind"));
  const char *file = f->policy;
  char path[4096];
  if (file == NULL && kind != NULL && strcmp(kind, "llm") == 0) {
    cfg->policy_llm = 1; /* prompt and parse are the run file's code */
    cfg->policy_desc = json_deep_copy(p);
    return policy_code(cfg, "(the run file's)", cfg->runfile_dir);
  }
  if (file == NULL && kind != NULL && strcmp(kind, "lua") == 0)
    file = json_string_value(json_object_get(p, "file"));
  if (file == NULL) {
    cfg->policy_desc = json_pack("{ss}", "kind", "random");
    return 0;
  }
  if (f->policy != NULL)
    snprintf(path, sizeof path, "%s", file);
  else
    resolve(cfg, file, path, sizeof path);
  canonical(path, sizeof path);
  if (split_module(path, cfg->policy_dir, sizeof cfg->policy_dir,
                   cfg->policy_mod, sizeof cfg->policy_mod) != 0) {
    ludo__cli_error("policy %s: not a Lua file name", file);
    return -1;
  }
  cfg->policy_desc = json_pack("{ssss}", "kind", "lua", "file", path);
  if (access(path, R_OK) != 0) return 0; /* loading it says why */
  return policy_code(cfg, file, cfg->policy_dir);
}

/* The tasks, repeats and episodes. Returns 0, or LUDO__CLI_USAGE after
 * saying that --episodes was given with a run file's tasks (the flag is
 * the mistake, as --repeats without tasks is). */
static int set_tasks(eval_cfg_t *cfg, const flags_t *f, json_t *rf) {
  json_t *t = json_object_get(rf, "tasks");
  cfg->task_count = -1;
  if (json_is_object(t) && f->episodes >= 0) {
    ludo__cli_error("--episodes: the run file gives tasks; give tasks or "
                    "episodes, not both (drop --episodes, or the run "
                    "file's tasks)");
    return LUDO__CLI_USAGE;
  }
  if (!json_is_object(t)) {
    cfg->episodes = num_or(rf, "episodes", f->episodes, 1);
    cfg->repeats = 1;
    return 0;
  }
  if (json_is_string(json_object_get(t, "split")))
    snprintf(cfg->split, sizeof cfg->split, "%s",
             json_string_value(json_object_get(t, "split")));
  cfg->task_count = num_or(t, "count", -1, -1);
  if (json_is_array(json_object_get(t, "ids")))
    cfg->task_ids = json_incref(json_object_get(t, "ids"));
  cfg->repeats = num_or(rf, "repeats", f->repeats, 1);
  cfg->episodes = 0;
  return 0;
}

static long long default_concurrency(void) {
  long long c = 8LL * (long long)uv_available_parallelism();
  return c > 256 ? 256 : c;
}

/* The success rule; a function's code (the Lua files of the run file's
 * folder, what it can call and require) is digested as a policy's is.
 * Returns 0, or -1 after saying why the code cannot be read. */
static int set_success(eval_cfg_t *cfg, json_t *rf) {
  json_t *s = json_object_get(rf, "success");
  const char *kind = json_string_value(json_object_get(s, "kind"));
  cfg->success_kind = EVAL_SUCCESS_DEFAULT;
  if (kind != NULL && strcmp(kind, "threshold") == 0) {
    cfg->success_kind = EVAL_SUCCESS_THRESHOLD;
    cfg->success_threshold =
        json_number_value(json_object_get(s, "threshold"));
  } else if (kind != NULL && strcmp(kind, "function") == 0) {
    cfg->success_kind = EVAL_SUCCESS_FN;
    if (eval_digest_lua(cfg->runfile_dir, cfg->success_digest) != 0) {
      ludo__cli_error("the run file's success function: cannot read the "
                      "Lua files of its folder %s (unreadable, or more than "
                      "10,000 Lua files or 200,000 entries), which run.json's "
                      "code must describe: put the run file in a folder of "
                      "its own", cfg->runfile_dir);
      return -1;
    }
  }
  return 0;
}

static int resolve_all(eval_cfg_t *cfg, const flags_t *f, json_t *rf,
                       const char *env_arg) {
  const char *env = env_arg ? env_arg
                            : json_string_value(json_object_get(rf, "env"));
  const char *out = f->out ? f->out
                           : json_string_value(json_object_get(rf, "out"));
  if (env == NULL) { /* a run-file error: exit status 1, as the others */
    ludo__cli_error("the run file names no env");
    return 1;
  }
  if (env_arg != NULL)
    snprintf(cfg->env, sizeof cfg->env, "%s", env);
  else
    resolve(cfg, env, cfg->env, sizeof cfg->env);
  cfg->remote = is_url(cfg->env);
  canonical(cfg->env, sizeof cfg->env);
  if (cfg->remote || eval_digest(cfg->env, cfg->env_digest) != 0)
    cfg->env_digest[0] = '\0';
  snprintf(cfg->out, sizeof cfg->out, "%s", out ? out : "eval-out");
  if (set_policy(cfg, f, rf) != 0) return 1;
  if (set_tasks(cfg, f, rf) != 0) return LUDO__CLI_USAGE;
  if (f->repeats >= 0 && !eval_has_tasks(cfg)) {
    ludo__cli_error("--repeats needs tasks (a run file's tasks field)");
    return LUDO__CLI_USAGE;
  }
  cfg->seed = num_or(rf, "seed", f->seed, 0);
  cfg->max_steps = num_or(rf, "max_steps", f->max_steps, 100);
  cfg->concurrency = num_or(rf, "concurrency", f->concurrency,
                            default_concurrency());
  cfg->workers = num_or(rf, "workers", f->workers, 1);
  if (cfg->workers < 1 || cfg->workers > 256) { /* ludo.eval.runfile
                                                    refuses it first */
    ludo__cli_error("the run file's workers must be 1 to 256 (got %lld)",
                    cfg->workers);
    return 1;
  }
  /* A worker process of a run (eval_workers.c): not a flag, so that no
   * user gives it by mistake. */
  cfg->worker = getenv("LUDO_EVAL_WORKER") != NULL;
  cfg->budget_ms = f->budget >= 0 ? f->budget : 10000;
  cfg->cap_mb = f->cap >= 0 ? f->cap : 64;
  cfg->pass_k = json_is_array(json_object_get(rf, "pass_k"))
                    ? json_incref(json_object_get(rf, "pass_k"))
                    : json_array();
  if (set_success(cfg, rf) != 0) return 1;
  cfg->resume = f->resume;
  cfg->trajectories = !f->no_traj;
  cfg->quiet = f->quiet;
  cfg->shard_index = f->shard_n > 0 ? f->shard_i : 0;
  cfg->shard_count = f->shard_n > 0 ? f->shard_n : 0;
  cfg->token = f->token ? f->token : getenv("LUDO_TOKEN");
  return -1;
}

int eval_config(const ludo__cli_cmd_t *cmd, int argc, char **argv,
                eval_cfg_t *cfg) {
  flags_t f;
  const char *arg;
  json_t *rf;
  int rc;
  memset(cfg, 0, sizeof *cfg);
  memset(&f, 0, sizeof f);
  f.episodes = f.repeats = f.seed = f.concurrency = f.max_steps = -1;
  f.workers = -1;
  f.budget = f.cap = -1;
  rc = ludo__cli_parse(cmd, argc, argv, apply, &f, &arg, "RUN.lua or ENV",
                       "a run file or an environment");
  if (rc >= 0) return rc;
  if (!is_runfile(arg) && names_lua(arg) && access(arg, F_OK) != 0) {
    ludo__cli_error("the run file %s does not exist", arg);
    return 1;
  }
  if (!is_runfile(arg)) {
    rf = json_object();
    rc = resolve_all(cfg, &f, rf, arg);
    json_decref(rf);
    return rc;
  }
  if (split_module(arg, cfg->runfile_dir, sizeof cfg->runfile_dir,
                   cfg->runfile_mod, sizeof cfg->runfile_mod) != 0) {
    ludo__cli_error("%s: not a Lua file name (NAME.lua)", arg);
    return LUDO__CLI_USAGE;
  }
  rf = runfile_read(cfg, arg);
  if (rf == NULL) return 1;
  rc = resolve_all(cfg, &f, rf, NULL);
  json_decref(rf);
  return rc;
}

void eval_config_free(eval_cfg_t *cfg) {
  json_decref(cfg->task_ids);
  json_decref(cfg->pass_k);
  json_decref(cfg->policy_desc);
}

static json_t *tasks_json(const eval_cfg_t *cfg) {
  json_t *t;
  if (!eval_has_tasks(cfg)) return json_null();
  t = json_object();
  if (cfg->split[0] != '\0')
    json_object_set_new(t, "split", json_string(cfg->split));
  if (cfg->task_count >= 0)
    json_object_set_new(t, "count", json_integer(cfg->task_count));
  if (cfg->task_ids != NULL)
    json_object_set(t, "ids", cfg->task_ids);
  return t;
}

static json_t *success_json(const eval_cfg_t *cfg) {
  if (cfg->success_kind == EVAL_SUCCESS_THRESHOLD)
    return json_pack("{sssf}", "kind", "threshold", "threshold",
                     cfg->success_threshold);
  if (cfg->success_kind == EVAL_SUCCESS_FN) /* an edit of it: another run */
    return json_pack("{ssss}", "kind", "function", "code",
                     cfg->success_digest);
  return json_pack("{ss}", "kind", "default");
}

json_t *eval_run_json(const eval_cfg_t *cfg, long long episodes_total) {
  json_t *run = json_object();
  json_object_set_new(run, "env", json_string(cfg->env));
  json_object_set_new(run, "tasks", tasks_json(cfg));
  json_object_set_new(run, "episodes_total", json_integer(episodes_total));
  json_object_set_new(run, "repeats", json_integer(cfg->repeats));
  json_object_set(run, "pass_k", cfg->pass_k);
  json_object_set(run, "policy", cfg->policy_desc);
  json_object_set_new(run, "seed", json_integer(cfg->seed));
  json_object_set_new(run, "max_steps", json_integer(cfg->max_steps));
  json_object_set_new(run, "cpu_budget_ms", json_integer(cfg->budget_ms));
  json_object_set_new(run, "memory_cap_mb", json_integer(cfg->cap_mb));
  json_object_set_new(run, "success", success_json(cfg));
  /* What the code was: an edit at the same path is another run. */
  json_object_set_new(
      run, "code",
      json_pack("{soso}", "env",
                cfg->env_digest[0] ? json_string(cfg->env_digest)
                                   : json_null(),
                "policy",
                cfg->policy_digest[0] ? json_string(cfg->policy_digest)
                                      : json_null()));
  json_object_set_new(
      run, "shard",
      cfg->shard_count > 0
          ? json_pack("{sIsI}", "index", (json_int_t)cfg->shard_index,
                      "count", (json_int_t)cfg->shard_count)
          : json_null());
  json_object_set_new(
      run, "execution",
      json_pack("{sIsIsb}", "concurrency", (json_int_t)cfg->concurrency,
                "workers", (json_int_t)cfg->workers, "trajectories",
                cfg->trajectories));
  return run;
}
