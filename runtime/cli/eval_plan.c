/* eval_plan.c - the episodes of a run, enumerated deterministically: for
 * tasks, task t (in the split's order, or the run file's ids) and repeat r
 * make episode t * repeats + r; for seeded episodes episode i is the i-th.
 * Each episode's seed comes from the run's seed and its index alone, so an
 * episode is the same whatever the concurrency, shard or resume. A shard
 * I/N keeps the episodes whose index % N == I. */
#include <stdlib.h>
#include <string.h>

#include "cli/eval.h"

uint64_t eval_episode_seed(long long seed, long long index) {
  /* splitmix64 of seed, then of index: the seeds of neighbouring runs and
   * episodes are unrelated. */
  uint64_t z = (uint64_t)seed + 0x9e3779b97f4a7c15ULL * ((uint64_t)index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return z & ((1ULL << 53) - 1);
}

/* The id of a task: its "id" field when it is a string, else the task
 * itself when it is a string, else "SPLIT/INDEX". Caller frees. */
static char *task_id(const char *split, json_t *task, long long index) {
  json_t *id = json_object_get(task, "id");
  char buf[256];
  if (json_is_string(id)) return strdup(json_string_value(id));
  if (json_is_string(task)) return strdup(json_string_value(task));
  snprintf(buf, sizeof buf, "%s/%lld", split, index);
  return strdup(buf);
}

/* The most episodes one process plans (72 bytes each, ~720 MB): a run
 * beyond it is split with --shard, each shard planning only its own. */
#define PLAN_MAX 10000000LL

/* Of `total` episodes, how many fall in cfg's shard. */
static long long shard_size(const eval_cfg_t *cfg, long long total) {
  if (cfg->shard_count == 0) return total;
  return total / cfg->shard_count +
         (cfg->shard_index < total % cfg->shard_count ? 1 : 0);
}

/* Refuses a plan of more than PLAN_MAX episodes in this process. */
static int too_many(const eval_cfg_t *cfg, long long total) {
  long long n = shard_size(cfg, total);
  if (n <= PLAN_MAX) return 0;
  ludo__cli_error("this run has %lld episodes for one process, more than "
                  "%lld: split it with --shard I/N (each shard plans only "
                  "its own; docs/eval.md, \"Shards\")", n, PLAN_MAX);
  return -1;
}

static int no_memory(long long n) {
  ludo__cli_error("no memory for a plan of %lld episodes", n);
  return -1;
}

/* Asks the session's tasks `method` ("list" of `split`, or "splits");
 * the answer (new ref), or NULL after saying why. */
static json_t *tasks_call(ludo_session_t *s, const char *method,
                          const char *split) {
  ludo__cli_buf_t req = {0};
  const char *out;
  size_t n;
  json_t *v = NULL;
  ludo__cli_buf_printf(&req, "{\"method\":\"%s\"", method);
  if (split != NULL) {
    ludo__cli_buf_printf(&req, ",\"split\":");
    ludo__cli_buf_json_string(&req, split);
  }
  ludo__cli_buf_printf(&req, "}");
  if (ludo_session_tasks(s, req.p, req.len, &out, &n) != 0)
    ludo__cli_error("tasks%s%s: %s", split ? " of split " : "",
                    split ? split : "", ludo_session_errmsg(s));
  else
    v = json_loadb(out, n, 0, NULL);
  ludo__cli_buf_free(&req);
  if (v != NULL && !json_is_array(v)) {
    ludo__cli_error("tasks %s: not a list", method);
    json_decref(v);
    v = NULL;
  }
  return v;
}

/* The tasks to run, in order: split, index in it, id. */
typedef struct {
  char **split, **id;
  long long *index;
  size_t n, cap;
} picks_t;

static void picks_free(picks_t *p) {
  size_t i;
  for (i = 0; i < p->n; i++) {
    free(p->split[i]);
    free(p->id[i]);
  }
  free(p->split);
  free(p->id);
  free(p->index);
}

static int picks_init(picks_t *p, size_t cap) {
  p->cap = cap;
  p->split = calloc(cap + 1, sizeof *p->split);
  p->id = calloc(cap + 1, sizeof *p->id);
  p->index = calloc(cap + 1, sizeof *p->index);
  return p->split && p->id && p->index ? 0 : no_memory((long long)cap);
}

static void pick_add(picks_t *p, const char *split, long long index,
                     char *id) {
  if (id == NULL || p->n >= p->cap) {
    free(id);
    return;
  }
  p->split[p->n] = strdup(split);
  p->index[p->n] = index;
  p->id[p->n++] = id;
}

/* The names of the splits to look ids up in: cfg's, or every split. */
static json_t *splits_of(const eval_cfg_t *cfg, ludo_session_t *s) {
  json_t *all, *names;
  size_t i;
  if (cfg->split[0] != '\0') return json_pack("[s]", cfg->split);
  if ((all = tasks_call(s, "splits", NULL)) == NULL) return NULL;
  names = json_array();
  for (i = 0; i < json_array_size(all); i++) {
    json_t *name = json_object_get(json_array_get(all, i), "name");
    if (json_is_string(name)) json_array_append(names, name);
  }
  json_decref(all);
  return names;
}

/* Finds one id in the listed splits. Returns 0 or -1 (not found). */
static int pick_id(picks_t *p, json_t *names, json_t *lists,
                   const char *want) {
  size_t i, j;
  for (i = 0; i < json_array_size(names); i++) {
    const char *split = json_string_value(json_array_get(names, i));
    json_t *list = json_array_get(lists, i);
    for (j = 0; j < json_array_size(list); j++) {
      char *id = task_id(split, json_array_get(list, j), (long long)j);
      if (id != NULL && strcmp(id, want) == 0) {
        pick_add(p, split, (long long)j, id);
        return 0;
      }
      free(id);
    }
  }
  return -1;
}

/* The run file's ids, looked up in their split or in every split. */
static int pick_ids(const eval_cfg_t *cfg, ludo_session_t *s, picks_t *p) {
  json_t *names = splits_of(cfg, s), *lists = json_array();
  size_t i, nids = json_array_size(cfg->task_ids);
  int rc = names && picks_init(p, nids) == 0 ? 0 : -1;
  for (i = 0; rc == 0 && i < json_array_size(names); i++) {
    json_t *l = tasks_call(s, "list",
                           json_string_value(json_array_get(names, i)));
    rc = l != NULL ? json_array_append_new(lists, l) : -1;
  }
  for (i = 0; rc == 0 && i < nids; i++) {
    const char *want = json_string_value(json_array_get(cfg->task_ids, i));
    if ((rc = pick_id(p, names, lists, want)) != 0)
      ludo__cli_error("tasks: no task '%s' in %s%s", want,
                      cfg->split[0] ? "split " : "any split",
                      cfg->split[0] ? cfg->split : "");
  }
  json_decref(names);
  json_decref(lists);
  return rc;
}

/* The tasks of a local run: the split's, cut to count, or by id. */
static int pick_listed(const eval_cfg_t *cfg, ludo_session_t *s,
                       picks_t *p) {
  json_t *list;
  size_t i, n;
  if (cfg->task_ids != NULL) return pick_ids(cfg, s, p);
  if ((list = tasks_call(s, "list", cfg->split)) == NULL) return -1;
  n = json_array_size(list);
  if (cfg->task_count >= 0 && (size_t)cfg->task_count > n) {
    ludo__cli_error("tasks: split %s has %zu tasks, not the %lld the run "
                    "asks for (count)", cfg->split, n, cfg->task_count);
    json_decref(list);
    return -1;
  }
  if (cfg->task_count >= 0) n = (size_t)cfg->task_count;
  if (picks_init(p, n) != 0) {
    json_decref(list);
    return -1;
  }
  for (i = 0; i < n; i++)
    pick_add(p, cfg->split, (long long)i,
             task_id(cfg->split, json_array_get(list, i), (long long)i));
  json_decref(list);
  return 0;
}

/* The tasks of a remote run: indices 0 to count - 1 (the client has no
 * task listing; ids name them SPLIT/INDEX). */
static int pick_counted(const eval_cfg_t *cfg, picks_t *p) {
  long long i;
  char buf[256];
  if (cfg->task_count < 0 || cfg->task_ids != NULL) {
    ludo__cli_error("against a server, tasks need a split and a count "
                    "(tasks = {split = \"test\", count = N}); task ids "
                    "need a local environment");
    return -1;
  }
  if (picks_init(p, (size_t)cfg->task_count) != 0) return -1;
  for (i = 0; i < cfg->task_count; i++) {
    snprintf(buf, sizeof buf, "%s/%lld", cfg->split, i);
    pick_add(p, cfg->split, i, strdup(buf));
  }
  return 0;
}

static int in_shard(const eval_cfg_t *cfg, long long index) {
  return cfg->shard_count == 0 || index % cfg->shard_count == cfg->shard_index;
}

static void plan_add(const eval_cfg_t *cfg, eval_plan_t *plan, long long index,
                     long long repeat, const char *split,
                     long long task_index, const char *id) {
  eval_ep_t *e;
  plan->total++;
  if (!in_shard(cfg, index)) return;
  e = &plan->eps[plan->n++];
  memset(e, 0, sizeof *e);
  e->index = index;
  e->repeat = repeat;
  e->seed = eval_episode_seed(cfg->seed, index);
  e->task_index = task_index;
  e->task_id = id ? strdup(id) : NULL;
  e->split = split ? strdup(split) : NULL;
}

int eval_plan(const eval_cfg_t *cfg, ludo_session_t *s, eval_plan_t *plan) {
  picks_t p = {0};
  size_t t;
  long long r, i;
  memset(plan, 0, sizeof *plan);
  if (!eval_has_tasks(cfg)) {
    if (too_many(cfg, cfg->episodes)) return -1;
    plan->eps = calloc((size_t)shard_size(cfg, cfg->episodes) + 1,
                       sizeof *plan->eps);
    if (plan->eps == NULL) return no_memory(cfg->episodes);
    for (i = 0; i < cfg->episodes; i++)
      plan_add(cfg, plan, i, 0, NULL, -1, NULL);
    return 0;
  }
  if ((s != NULL ? pick_listed(cfg, s, &p) : pick_counted(cfg, &p)) != 0) {
    picks_free(&p);
    return -1;
  }
  if (p.n == 0) {
    ludo__cli_error("split %s has no tasks to run", cfg->split);
    picks_free(&p);
    return -1;
  }
  if (too_many(cfg, (long long)p.n * cfg->repeats)) {
    picks_free(&p);
    return -1;
  }
  plan->eps = calloc((size_t)shard_size(cfg, (long long)p.n * cfg->repeats) +
                         1, sizeof *plan->eps);
  if (plan->eps == NULL) {
    picks_free(&p);
    return no_memory((long long)p.n * cfg->repeats);
  }
  for (t = 0; t < p.n; t++)
    for (r = 0; r < cfg->repeats; r++)
      plan_add(cfg, plan, (long long)t * cfg->repeats + r, r, p.split[t],
               p.index[t], p.id[t]);
  picks_free(&p);
  return 0;
}

void eval_plan_free(eval_plan_t *plan) {
  size_t i;
  for (i = 0; i < plan->n; i++) {
    free(plan->eps[i].task_id);
    free(plan->eps[i].split);
  }
  free(plan->eps);
  memset(plan, 0, sizeof *plan);
}

eval_ep_t *eval_plan_find(eval_plan_t *plan, long long index) {
  size_t lo = 0, hi = plan->n; /* sorted by index */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (plan->eps[mid].index == index) return &plan->eps[mid];
    if (plan->eps[mid].index < index)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}
