/* eval_episode.c - the episodes of `ludo eval`: each slot runs one at a
 * time, as a chain of non-blocking calls on the loop (open a session or
 * use the slot's client, reset, policy reset, then act and step until
 * done or max_steps), and writes the episode's record. C slots make C
 * episodes in flight. Every callback first checks whether the run is
 * being stopped (Ctrl-C): then the episode ends as ECANCELED. */
#include <stdlib.h>
#include <string.h>

#include "cli/eval.h"

static void slot_next(eval_slot_t *sl);

/* Writes the record and moves on to the next episode. */
static void write_record(eval_slot_t *sl, json_t *rec) {
  eval_run_t *r = sl->run;
  if (eval_out_append(r->out, rec) != 0 && !r->failed) {
    /* said; the episodes in flight are cancelled, unrecorded */
    ludo__cli_error("the run stops here (--resume runs the episodes "
                    "without a record once %s/results.jsonl can be "
                    "written)", r->out->dir);
    r->failed = 1;
    eval_slots_cancel(r);
  }
  /* Ctrl-C stopped the Lua running (ludo_runtime_interrupt): the calls
   * queued behind it are cancelled now, before any of them begins, not
   * when the loop hears of the signal. */
  if (eval_interrupted && !r->stopping) eval_slots_cancel(r);
  eval_progress_episode(&r->progress, sl->reward, sl->err_class[0] != '\0',
                        strcmp(sl->err_class, "ECANCELED") == 0,
                        eval_class_rerun(sl->err_class) &&
                            strcmp(sl->err_class, "ECANCELED") != 0);
  json_decref(rec);
  r->finished++;
  sl->ep = NULL;
  slot_next(sl);
}

/* The run file's success function answered for sl->rec. */
static void on_judge(ludo_script_t *sc, int status, const char *out,
                     size_t len, void *ud) {
  eval_slot_t *sl = ud;
  json_t *rec = sl->rec;
  (void)sc;
  sl->rec = NULL;
  if (sl->cancelled && status != 0) status = LUDO_ECANCELED;
  if (status == 0) {
    json_object_set_new(rec, "success",
                        json_boolean(len == 4 && !memcmp(out, "true", 4)));
  } else { /* the success function failed: the episode with it */
    eval_record_error(sl, status, out, len);
    json_object_set_new(rec, "success", json_false());
    json_object_set_new(rec, "error",
                        json_pack("{ssss}", "class", sl->err_class,
                                  "message", sl->err.p ? sl->err.p : ""));
  }
  write_record(sl, rec);
}

/* Asks the run file's success function about the record. */
static void judge(eval_slot_t *sl, json_t *rec) {
  char *text = eval_json_dumps(rec);
  int rc;
  ludo__cli_buf_reset(&sl->args);
  ludo__cli_buf_printf(&sl->args, "[");
  ludo__cli_buf_json_string(&sl->args, sl->run->cfg->runfile_mod);
  ludo__cli_buf_printf(&sl->args, ",%s]", text ? text : "null");
  free(text);
  sl->rec = rec;
  sl->pending = P_JUDGE;
  rc = ludo_script_call_async(sl->judge, "success", sl->args.p, sl->args.len,
                              on_judge, sl);
  if (rc != 0) {
    const char *m = ludo_script_errmsg(sl->judge);
    on_judge(sl->judge, rc, m, strlen(m), sl);
  }
}

/* Ends the episode: the session goes, the record is written (after the
 * run file's success function, when it has one). */
static void finish(eval_slot_t *sl) {
  eval_run_t *r = sl->run;
  json_t *rec;
  eval_cpu_update(r);
  eval_traj_close(sl);
  rec = eval_record_new(sl);
  if (sl->s != NULL) ludo_session_close_async(sl->s, NULL, NULL);
  sl->s = NULL;
  sl->pending = P_NONE;
  if (r->cfg->success_kind == EVAL_SUCCESS_FN && sl->judge != NULL &&
      sl->err_class[0] == '\0' && !sl->cancelled)
    judge(sl, rec);
  else
    write_record(sl, rec);
}

/* Ends the episode with an error. */
static void finish_error(eval_slot_t *sl, int status, const char *msg,
                         size_t len) {
  eval_record_error(sl, status, msg, len);
  finish(sl);
}

/* ---- the target: a session or the slot's client ------------------------- */

static void on_session_reset(ludo_session_t *s, int status, const char *data,
                             size_t len, void *ud);
static void on_client_reset(ludo_client_t *c, int status, const char *data,
                            size_t len, void *ud);
static void on_session_step(ludo_session_t *s, int status, const char *data,
                            size_t len, void *ud);
static void on_client_step(ludo_client_t *c, int status, const char *data,
                           size_t len, void *ud);

static int target_reset(eval_slot_t *sl, const char *json, size_t len) {
  sl->pending = P_RESET;
  return sl->client
             ? ludo_client_reset_async(sl->client, json, len, on_client_reset,
                                       sl)
             : ludo_session_reset_async(sl->s, json, len, on_session_reset,
                                        sl);
}

static int target_step(eval_slot_t *sl) {
  sl->pending = P_STEP;
  return sl->client ? ludo_client_step_async(sl->client, sl->action.p,
                                             sl->action.len, on_client_step,
                                             sl)
                    : ludo_session_step_async(sl->s, sl->action.p,
                                              sl->action.len,
                                              on_session_step, sl);
}

static const char *target_errmsg(const eval_slot_t *sl) {
  return sl->client ? ludo_client_errmsg(sl->client)
                    : ludo_session_errmsg(sl->s);
}

/* ---- the episode ---------------------------------------------------------- */

static void on_act(ludo_script_t *sc, int status, const char *out,
                   size_t len, void *ud);
static void stepped(eval_slot_t *sl, int status, const char *data,
                    size_t len);

/* Writes v in decimal at the end of t[24]; returns where it starts (the
 * step counter and integral rewards: no printf per step). */
static char *fmt_int(char t[24], long long v) {
  char *p = t + 24;
  unsigned long long u = v < 0 ? 0 - (unsigned long long)v
                               : (unsigned long long)v;
  do *--p = (char)('0' + u % 10); while ((u /= 10) != 0);
  if (v < 0) *--p = '-';
  return p;
}

/* The step's reward as the policy's context gets it (sl->reward_arg):
 * the value "%.17g" prints, which the policy's JSON reads back as the
 * same number of the same kind (integer or float), made without printf
 * when it can be: an integral value below 2^53 as an integer, another
 * value read exactly from a short decimal (st->reward_text: it reads back
 * as the same float) as that text. Integral values from 2^53 to 1e17 go
 * to printf: "%.17g" writes them as integers, while the step's text
 * (1e+16) would read back as a float. Empty when the reward is not a
 * finite number (the context then has none). */
static void reward_arg(eval_slot_t *sl, const eval_step_t *st) {
  double v = st->reward;
  char t[24], *p;
  int whole;
  sl->reward_arg_len = 0;
  if (!(v == v && v - v == 0)) return;
  whole = v > -1e17 && v < 1e17 && v == (double)(long long)v;
  if (whole && v > -9007199254740992.0 && v < 9007199254740992.0) {
    p = fmt_int(t, (long long)v);
    sl->reward_arg_len = (size_t)(t + sizeof t - p);
    memcpy(sl->reward_arg, p, sl->reward_arg_len);
    return;
  }
  if (!whole && st->reward_text != NULL &&
      st->reward_len < sizeof sl->reward_arg) {
    memcpy(sl->reward_arg, st->reward_text, st->reward_len);
    sl->reward_arg_len = st->reward_len;
    return;
  }
  sl->reward_arg_len =
      (size_t)snprintf(sl->reward_arg, sizeof sl->reward_arg, "%.17g", v);
}

/* Appends the policy's context: {"step", "done", "reward", "error"}, or
 * (`fields`) its fields as ludo.policy.act_text takes them: step, reward,
 * error (null when there is none). */
static void add_context(eval_slot_t *sl, int fields) {
  char t[24], *p = fmt_int(t, sl->steps);
  int reward = sl->has_reward && sl->reward_arg_len > 0;
  if (fields) {
    ludo__cli_buf_add(&sl->args, p, (size_t)(t + sizeof t - p));
    ludo__cli_buf_add(&sl->args, ",", 1);
    if (reward)
      ludo__cli_buf_add(&sl->args, sl->reward_arg, sl->reward_arg_len);
    else
      ludo__cli_buf_add(&sl->args, "null", 4);
    ludo__cli_buf_add(&sl->args, ",", 1);
    if (sl->refusal.len > 0)
      ludo__cli_buf_add(&sl->args, sl->refusal.p, sl->refusal.len);
    else
      ludo__cli_buf_add(&sl->args, "null", 4);
    return;
  }
  ludo__cli_buf_add(&sl->args, "{\"step\":", 8);
  ludo__cli_buf_add(&sl->args, p, (size_t)(t + sizeof t - p));
  ludo__cli_buf_add(&sl->args, ",\"done\":false", 13);
  if (reward) {
    ludo__cli_buf_add(&sl->args, ",\"reward\":", 10);
    ludo__cli_buf_add(&sl->args, sl->reward_arg, sl->reward_arg_len);
  }
  if (sl->refusal.len > 0) {
    ludo__cli_buf_add(&sl->args, ",\"error\":", 9);
    ludo__cli_buf_add(&sl->args, sl->refusal.p, sl->refusal.len);
  }
  ludo__cli_buf_add(&sl->args, "}", 1);
}

/* Asks the policy for the next action, or ends a long enough episode.
 * A Lua policy's `action` gets [step, reward, error, the last result's
 * text as a JSON string with null for its observation, the observation]
 * (ludo.policy.act_text: the observation decoded, the rest of the result
 * only when the policy reads context.result; without an observation the
 * whole text, which act_text decodes); an LLM policy's `act` gets [last
 * result, context]. */
static void ask_policy(eval_slot_t *sl) {
  int rc;
  if (eval_interrupted) { /* Ctrl-C, before the loop has heard of it */
    sl->cancelled = 1;
    finish_error(sl, LUDO_ECANCELED, "", 0);
    return;
  }
  if (sl->steps >= sl->run->cfg->max_steps) {
    sl->truncated = 1;
    finish(sl);
    return;
  }
  ludo__cli_buf_reset(&sl->args);
  ludo__cli_buf_add(&sl->args, "[", 1);
  if (sl->run->cfg->policy_llm) {
    ludo__cli_buf_add(&sl->args, sl->last.p, sl->last.len);
    ludo__cli_buf_add(&sl->args, ",", 1);
    add_context(sl, 0);
  } else {
    add_context(sl, 1);
    if (sl->has_obs) { /* the text without its observation, then that */
      size_t end = sl->obs_off + sl->obs_len;
      ludo__cli_buf_add(&sl->args, ",\"", 2);
      ludo__cli_buf_json_chars(&sl->args, sl->last.p, sl->obs_off);
      ludo__cli_buf_add(&sl->args, "null", 4);
      ludo__cli_buf_json_chars(&sl->args, sl->last.p + end,
                               sl->last.len - end);
      ludo__cli_buf_add(&sl->args, "\",", 2);
      ludo__cli_buf_add(&sl->args, sl->last.p + sl->obs_off,
                        sl->obs_len);
    } else {
      ludo__cli_buf_add(&sl->args, ",", 1);
      ludo__cli_buf_json_stringn(&sl->args, sl->last.p, sl->last.len);
    }
  }
  ludo__cli_buf_add(&sl->args, "]", 1);
  ludo__cli_buf_reset(&sl->refusal);
  sl->pending = P_POLICY;
  rc = ludo_script_call_async(sl->policy,
                              sl->run->cfg->policy_llm ? "act" : "action",
                              sl->args.p, sl->args.len, on_act, sl);
  if (rc != 0) {
    const char *m = ludo_script_errmsg(sl->policy);
    finish_error(sl, rc, m, strlen(m));
  }
}

/* An invalid action: recorded, counted, and the policy asked again (the
 * step counts toward max_steps). */
static void invalid_action(eval_slot_t *sl, json_t *text, const char *why) {
  sl->steps++;
  sl->invalid++;
  eval_traj_invalid(sl, text, why);
  ludo__cli_buf_reset(&sl->refusal);
  ludo__cli_buf_json_string(&sl->refusal, why);
  sl->has_reward = 0;
  ask_policy(sl);
}

/* An LLM policy's reply {"action", "text"}: keeps both. */
static int llm_reply(eval_slot_t *sl, json_t *reply) {
  char *a = json_dumps(json_object_get(reply, "action"),
                       JSON_COMPACT | JSON_ENCODE_ANY);
  if (a == NULL) return -1;
  ludo__cli_buf_add(&sl->action, a, strlen(a));
  free(a);
  sl->text = json_incref(json_object_get(reply, "text"));
  return 0;
}

/* The invalid action ludo.eval.policy refused for a Lua policy (a NaN
 * or an infinity in it, which JSON cannot hold: lua/ludo/eval/policy.lua
 * raises "ludo.eval.policy: invalid action: WHY"): WHY's first line into
 * why[0..n), or NULL for any other failure of the call. */
static const char *refused_action(int status, const char *out, size_t len,
                                  char *why, size_t n) {
  static const char mark[] = "ESCRIPT: ludo.eval.policy: invalid action: ";
  const size_t k = sizeof mark - 1;
  const char *nl;
  size_t m;
  if (status != LUDO_ESCRIPT || len <= k || memcmp(out, mark, k) != 0)
    return NULL;
  nl = memchr(out + k, '\n', len - k);
  m = (nl ? (size_t)(nl - out) : len) - k;
  snprintf(why, n, "%.*s", (int)m, out + k);
  return why;
}

/* The policy's reply: the action (a Lua policy's `action`: its text is
 * used as it is), or an LLM policy's {"action", "text"} or {"invalid":
 * true, "text", "error"}. */
static void on_act(ludo_script_t *sc, int status, const char *out,
                   size_t len, void *ud) {
  eval_slot_t *sl = ud;
  json_t *reply = NULL;
  char why[512];
  int rc;
  (void)sc;
  if (!sl->cancelled && refused_action(status, out, len, why, sizeof why)) {
    ludo__cli_buf_reset(&sl->action);
    invalid_action(sl, NULL, why);
    return;
  }
  if (status != 0 || sl->cancelled) {
    finish_error(sl, sl->cancelled ? LUDO_ECANCELED : status, out, len);
    return;
  }
  ludo__cli_buf_reset(&sl->action);
  json_decref(sl->text);
  sl->text = NULL;
  if (!sl->run->cfg->policy_llm) {
    ludo__cli_buf_add(&sl->action, out, len);
  } else if ((reply = json_loadb(out, len, 0, NULL)) == NULL ||
             json_is_true(json_object_get(reply, "invalid")) ||
             llm_reply(sl, reply) != 0) {
    const char *why = json_string_value(json_object_get(reply, "error"));
    invalid_action(sl, json_object_get(reply, "text"),
                   why        ? why
                   : reply    ? "the policy's reply has no action"
                              : "the policy's reply is not JSON");
    json_decref(reply);
    return;
  }
  json_decref(reply);
  if ((rc = target_step(sl)) != 0) { /* as if the step had answered */
    const char *m = target_errmsg(sl);
    stepped(sl, rc, m, strlen(m));
  }
}

/* A step's rubric scores, read before they are added. */
#define MAX_SCORES 64
typedef struct {
  const char *path[MAX_SCORES];
  size_t len[MAX_SCORES];
  double v[MAX_SCORES];
  int n, over;
} scores_t;

static void score(void *ud, const char *path, size_t n, double v) {
  scores_t *sc = ud;
  if (sc->n == MAX_SCORES) {
    sc->over = 1;
    return;
  }
  sc->path[sc->n] = path;
  sc->len[sc->n] = n;
  sc->v[sc->n++] = v;
}

static int finite(double x) { return x == x && x - x == 0; }

/* The sum of the rubric at path k: the one the i-th score of the last
 * step went to when the path is the same (a rubric tree scores its
 * rubrics in the same order every step: no hash lookup then), else looked
 * up (NULL: none yet) and remembered for the i-th score. */
static json_t *score_sum(eval_slot_t *sl, int i, const char *k, size_t n) {
  eval_sum_t *c = &sl->sums[i];
  json_t *sum;
  if (c->sum != NULL && c->len == n && memcmp(c->path, k, n) == 0)
    return c->sum;
  sum = json_object_getn(sl->rubrics, k, n);
  c->sum = n <= sizeof c->path ? sum : NULL; /* a longer path: not kept */
  if (c->sum != NULL) {
    memcpy(c->path, k, n);
    c->len = n;
  }
  return sum;
}

/* Adds a rubric score (the i-th of its step; -1: not counted) to its sum;
 * a sum that is not a finite number (JSON has none) is noted in
 * sl->nonfinite and left as it was. */
static void add_score(eval_slot_t *sl, int i, const char *k, size_t n,
                      double x) {
  json_t *sum = i >= 0 && i < EVAL_SUMS ? score_sum(sl, i, k, n)
                                        : json_object_getn(sl->rubrics, k, n);
  double to = sum != NULL ? json_real_value(sum) + x : x;
  if (!finite(to))
    sl->nonfinite = 1;
  else if (sum != NULL)
    json_real_set(sum, to);
  else
    json_object_setn_new(sl->rubrics, k, n, json_real(to));
}

/* The result's reward, done and rubric scores (added to the sums: a
 * rubric that has no score in this step adds nothing, and one that never
 * scored has no sum in the record): read by eval_step_read (returns 1),
 * or by jansson when it gives up (returns 0; st->obs is then NULL). */
static int read_step(eval_slot_t *sl, const char *data, size_t len,
                     eval_step_t *st) {
  scores_t sc;
  json_t *res, *rub, *v;
  const char *k;
  int i;
  sc.n = sc.over = 0;
  if (eval_step_read(data, len, st, score, &sc) == 0 && !sc.over) {
    for (i = 0; i < sc.n; i++)
      add_score(sl, i, sc.path[i], sc.len[i], sc.v[i]);
    return 1;
  }
  res = json_loadb(data, len, 0, NULL);
  st->reward_text = NULL;
  st->obs = NULL;
  v = json_object_get(res, "reward");
  st->has_reward = json_is_number(v);
  st->reward = st->has_reward ? json_number_value(v) : 0.0;
  st->done = json_is_true(json_object_get(res, "done"));
  rub = json_object_get(json_object_get(res, "metadata"), "rubrics");
  json_object_foreach(rub, k, v) /* a null is no score: not added */
    if (json_is_number(v))
      add_score(sl, -1, k, strlen(k), json_number_value(v));
  json_decref(res);
  return 0;
}

/* Keeps the result the policy is asked about next: its text (sl->last)
 * and, when the walk read it (`walked`), where its observation is in it
 * (sl->obs_off, sl->obs_len, sl->has_obs). Without one the policy's
 * act_text decodes the whole result to find it. */
static void keep_last(eval_slot_t *sl, const char *data, size_t len,
                      const eval_step_t *st, int walked) {
  ludo__cli_buf_reset(&sl->last);
  ludo__cli_buf_add(&sl->last, data, len);
  sl->has_obs = walked && st->obs != NULL;
  if (sl->has_obs) {
    sl->obs_off = (size_t)(st->obs - data);
    sl->obs_len = st->obs_len;
  }
}

static void stepped(eval_slot_t *sl, int status, const char *data,
                    size_t len) {
  eval_step_t st;
  int walked;
  if (sl->cancelled) {
    finish_error(sl, LUDO_ECANCELED, data, len);
    return;
  }
  if (status == LUDO_ESCHEMA || status == LUDO_EINVAL) {
    char why[2048];
    snprintf(why, sizeof why, "%.*s", (int)(len < 2000 ? len : 2000), data);
    invalid_action(sl, sl->text, why); /* the environment refused it */
    return;
  }
  if (status != 0) {
    finish_error(sl, status, data, len);
    return;
  }
  sl->steps++;
  eval_traj_step(sl, data, len);
  walked = read_step(sl, data, len, &st);
  if (sl->nonfinite || !finite(sl->reward + st.reward)) {
    char why[160];
    snprintf(why, sizeof why, "EVALUE: step %lld's %s is not a finite "
             "number", sl->steps, sl->nonfinite ? "rubric score sum"
             : finite(st.reward) ? "reward sum" : "reward");
    finish_error(sl, LUDO_EVALUE, why, strlen(why));
    return;
  }
  sl->has_reward = st.has_reward;
  sl->last_reward = st.reward;
  if (st.has_reward) reward_arg(sl, &st);
  sl->reward += st.reward;
  sl->done = st.done;
  keep_last(sl, data, len, &st, walked);
  if (sl->done)
    finish(sl);
  else
    ask_policy(sl);
}

static void on_session_step(ludo_session_t *s, int status, const char *data,
                            size_t len, void *ud) {
  (void)s;
  stepped(ud, status, data, len);
}

static void on_client_step(ludo_client_t *c, int status, const char *data,
                           size_t len, void *ud) {
  (void)c;
  stepped(ud, status, data, len);
}

static void on_policy_reset(ludo_script_t *sc, int status, const char *out,
                            size_t len, void *ud) {
  eval_slot_t *sl = ud;
  (void)sc;
  if (status != 0 || sl->cancelled)
    finish_error(sl, sl->cancelled ? LUDO_ECANCELED : status, out, len);
  else if (sl->done)
    finish(sl);
  else
    ask_policy(sl);
}

static void was_reset(eval_slot_t *sl, int status, const char *data,
                      size_t len) {
  eval_step_t st;
  json_t *res;
  int rc;
  if (status != 0 || sl->cancelled) {
    finish_error(sl, sl->cancelled ? LUDO_ECANCELED : status, data, len);
    return;
  }
  eval_traj_reset(sl, sl->args.p, data, len);
  res = json_loadb(data, len, 0, NULL);
  sl->done = json_is_true(json_object_get(res, "done"));
  json_decref(res);
  keep_last(sl, data, len, &st,
            eval_step_read(data, len, &st, NULL, NULL) == 0);
  ludo__cli_buf_reset(&sl->args);
  ludo__cli_buf_printf(&sl->args, "[%llu,%.*s]",
                       (unsigned long long)sl->ep->seed, (int)len, data);
  sl->pending = P_POLICY;
  rc = ludo_script_call_async(sl->policy, "reset", sl->args.p, sl->args.len,
                              on_policy_reset, sl);
  if (rc != 0) {
    const char *m = ludo_script_errmsg(sl->policy);
    finish_error(sl, rc, m, strlen(m));
  }
}

static void on_session_reset(ludo_session_t *s, int status, const char *data,
                             size_t len, void *ud) {
  (void)s;
  was_reset(ud, status, data, len);
}

static void on_client_reset(ludo_client_t *c, int status, const char *data,
                            size_t len, void *ud) {
  (void)c;
  was_reset(ud, status, data, len);
}

/* Resets the target with the episode's seed (and task). */
static void reset(eval_slot_t *sl) {
  int rc;
  ludo__cli_buf_reset(&sl->args);
  eval_reset_opts(sl->ep, &sl->args);
  if ((rc = target_reset(sl, sl->args.p, sl->args.len)) != 0) {
    const char *m = target_errmsg(sl);
    finish_error(sl, rc, m, strlen(m));
  }
}

static void on_open(ludo_session_t *s, int status, void *ud) {
  eval_slot_t *sl = ud;
  sl->s = s;
  eval_llm_session(sl);
  if (status != 0 || sl->cancelled) {
    const char *m = sl->cancelled ? "" : ludo_runtime_errmsg(sl->run->rt);
    finish_error(sl, sl->cancelled ? LUDO_ECANCELED : status, m, strlen(m));
    return;
  }
  reset(sl);
}

/* Starts the slot's episode `e`. */
static void start(eval_slot_t *sl, eval_ep_t *e) {
  eval_run_t *r = sl->run;
  int rc;
  eval_cpu_update(r);
  sl->ep = e;
  sl->steps = sl->invalid = 0;
  sl->reward = sl->last_reward = 0;
  sl->done = sl->truncated = sl->has_reward = sl->nonfinite = 0;
  sl->reset_written = 0;
  sl->err_class[0] = '\0';
  ludo__cli_buf_reset(&sl->refusal);
  json_decref(sl->rubrics);
  sl->rubrics = json_object();
  memset(sl->sums, 0, sizeof sl->sums); /* they were sl->rubrics' */
  r->active++;
  sl->wall0 = eval_now();
  sl->cpu0 = r->cpu_share;
  eval_traj_open(sl);
  eval_llm_begin(sl);
  if (sl->client != NULL) {
    reset(sl);
    return;
  }
  sl->pending = P_OPEN;
  rc = ludo_session_open_async(r->env, on_open, sl);
  if (rc != 0) finish_error(sl, rc, "cannot open a session", 21);
}

/* The next episode without a record, or NULL. */
static eval_ep_t *next_episode(eval_run_t *r) {
  while (r->next < r->plan->n && r->plan->eps[r->next].done) r->next++;
  return r->next < r->plan->n ? &r->plan->eps[r->next++] : NULL;
}

static void slot_next(eval_slot_t *sl) {
  eval_run_t *r = sl->run;
  eval_ep_t *e;
  eval_cpu_update(r);
  r->active--;
  e = r->stopping || eval_interrupted ? NULL : next_episode(r);
  if (e != NULL) start(sl, e);
}

/* ---- running the slots ---------------------------------------------------- */

void eval_slots_start(eval_run_t *r) {
  size_t i;
  r->cpu_last = eval_cpu_now();
  for (i = 0; i < r->nslots; i++) {
    eval_ep_t *e = next_episode(r);
    if (e == NULL) break;
    start(&r->slots[i], e);
  }
}

/* Stops what the slot waits for: its callback then ends the episode as
 * ECANCELED (at once for a script or a client, from the loop for a
 * session). */
static void slot_cancel(eval_slot_t *sl) {
  ludo_script_t *sc;
  ludo_client_t *c;
  if (sl->ep == NULL || sl->cancelled) return;
  sl->cancelled = 1;
  eval_llm_take(sl); /* before the policy or the session goes */
  switch (sl->pending) {
    case P_POLICY:
      sc = sl->policy;
      sl->policy = NULL;
      ludo_script_free(sc);
      break;
    case P_JUDGE:
      sc = sl->judge;
      sl->judge = NULL;
      ludo_script_free(sc);
      break;
    case P_RESET:
    case P_STEP:
      if (sl->client != NULL) {
        c = sl->client;
        sl->client = NULL;
        ludo_client_close(c);
      } else if (sl->s != NULL) {
        ludo_session_close_async(sl->s, NULL, NULL);
        sl->s = NULL;
      }
      break;
    default: /* P_OPEN: the open's callback sees the flag */
      break;
  }
}

void eval_slots_cancel(eval_run_t *r) {
  size_t i;
  r->stopping = 1;
  for (i = 0; i < r->nslots; i++) slot_cancel(&r->slots[i]);
}
