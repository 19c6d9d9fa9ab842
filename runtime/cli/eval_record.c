/* eval_record.c - what an episode of `ludo eval` leaves (docs/eval.md):
 * its record in results.jsonl (error class and message, success, wall and
 * CPU time, LLM usage) and its trajectory file. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/eval.h"

/* ---- time -------------------------------------------------------------- */

double eval_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double eval_cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Shares the thread's CPU time since the last update among the episodes
 * in flight: an episode's cpu_ms is what it got of it. Their number only
 * changes when an episode starts or ends, so updating then is enough (and
 * saves a system call per step). */
void eval_cpu_update(eval_run_t *r) {
  double now = eval_cpu_now();
  if (r->active > 0) r->cpu_share += (now - r->cpu_last) / (double)r->active;
  r->cpu_last = now;
}

/* ---- LLM usage ---------------------------------------------------------- */

/* The LLM usage of one script or session: calls, failures, prompt and
 * completion tokens (ludo_*_llm_usage). */
static void usage_of(const ludo_script_t *sc, const ludo_session_t *s,
                     double u[4]) {
  ludo_llm_usage_t a = {0};
  if (sc != NULL) ludo_script_llm_usage(sc, &a);
  if (s != NULL) ludo_session_llm_usage(s, &a);
  u[0] = (double)a.calls;
  u[1] = (double)a.failures;
  u[2] = (double)a.prompt_tokens;
  u[3] = (double)a.completion_tokens;
}

/* Adds to the episode's usage what `now` has beyond `seen`, and makes
 * `now` the seen. */
static void take(double llm[4], double seen[4], const double now[4]) {
  int i;
  for (i = 0; i < 4; i++) {
    llm[i] += now[i] - seen[i];
    seen[i] = now[i];
  }
}

void eval_llm_take(eval_slot_t *sl) {
  double u[4];
  if (sl->policy != NULL) {
    usage_of(sl->policy, NULL, u);
    take(sl->llm, sl->llm_policy, u);
  }
  if (sl->s != NULL) {
    usage_of(NULL, sl->s, u);
    take(sl->llm, sl->llm_session, u);
  }
}

void eval_llm_begin(eval_slot_t *sl) {
  if (sl->policy != NULL) usage_of(sl->policy, NULL, sl->llm_policy);
  memset(sl->llm, 0, sizeof sl->llm);
}

void eval_llm_session(eval_slot_t *sl) {
  if (sl->s != NULL) usage_of(NULL, sl->s, sl->llm_session);
}

/* ---- the record ---------------------------------------------------------- */

volatile sig_atomic_t eval_interrupted; /* set by eval.c's signal handler */

/* An LLM judge's outage: a rubric's error (ludo.rubric names the rubric
 * first) wrapping the LLM client's "ELLM: ..." as LLMJudge words it
 * ("LLMJudge: the client failed: ELLM: ..."), on the message's first
 * line. */
static int judge_llm_failed(const char *msg, size_t len) {
  static const char rubric[] = "ESCRIPT: rubric ", root[] = "ESCRIPT: the "
      "root rubric", failed[] = "the client failed: ELLM: ";
  const char *nl = memchr(msg, '\n', len);
  size_t n = nl ? (size_t)(nl - msg) : len;
  if ((n < sizeof rubric - 1 || memcmp(msg, rubric, sizeof rubric - 1)) &&
      (n < sizeof root - 1 || memcmp(msg, root, sizeof root - 1)))
    return 0;
  return memmem(msg, n, failed, sizeof failed - 1) != NULL;
}

/* Records the episode's error: its class and the message's first line. An
 * LLM call that failed is ELLM, the policy's (its message without the
 * wrapper) or a judge's (the whole message: it names the rubric). */
void eval_record_error(eval_slot_t *sl, int status, const char *msg, size_t len) {
  const char *cls = ludo_err_name(status);
  size_t n = len;
  if (sl->err_class[0] != '\0') return; /* the first error stands */
  if (status == LUDO_ESCRIPT && len >= 14 &&
      strncmp(msg, "ESCRIPT: ELLM:", 14) == 0) {
    cls = "ELLM"; /* an LLM call failed (ludo.llm's "ELLM: ...") */
    msg += 9;     /* its message is ludo.llm's, without the wrapper */
    len -= 9;
    n = len;
  } else if (status == LUDO_ESCRIPT && judge_llm_failed(msg, len)) {
    cls = "ELLM";
  }
  if (eval_interrupted) sl->cancelled = 1; /* Ctrl-C came first */
  if (sl->cancelled) cls = "ECANCELED";
  snprintf(sl->err_class, sizeof sl->err_class, "%s", cls);
  if (memchr(msg, '\n', len)) n = (size_t)((const char *)memchr(msg, '\n', len) - msg);
  /* Cut before a UTF-8 sequence that would not fit whole (the runtime's
   * messages are UTF-8; a cut inside a character would make the record
   * JSON cannot hold). */
  if (n > 2000) {
    n = 2000;
    while (n > 0 && ((unsigned char)msg[n] & 0xC0) == 0x80) n--;
  }
  ludo__cli_buf_reset(&sl->err);
  if (sl->cancelled)
    ludo__cli_buf_printf(&sl->err, "ECANCELED: the run was interrupted");
  else
    ludo__cli_buf_printf(&sl->err, "%.*s", (int)n, msg);
}

static int success_default(const eval_slot_t *sl) {
  const eval_cfg_t *cfg = sl->run->cfg;
  if (sl->err_class[0] != '\0') return 0;
  if (cfg->success_kind == EVAL_SUCCESS_THRESHOLD)
    return sl->reward >= cfg->success_threshold;
  return sl->reward > 0;
}

/* Milliseconds to the microsecond: what a timer can tell apart. */
static double ms3(double ms) { return round(ms * 1000.0) / 1000.0; }

/* The record's error: {class, message}, or null. A message JSON cannot
 * hold (not UTF-8: the runtime's never are, but a message the CLI made
 * from a path may be) is replaced by a note saying so, so the episode is
 * still recorded. */
static json_t *record_error(const eval_slot_t *sl) {
  json_t *err;
  if (sl->err_class[0] == '\0') return json_null();
  err = json_pack("{ssss}", "class", sl->err_class, "message",
                  sl->err.p ? sl->err.p : "");
  if (err == NULL)
    err = json_pack("{ssss}", "class", sl->err_class, "message",
                    "(the error's message is not UTF-8)");
  return err;
}

json_t *eval_record_new(eval_slot_t *sl) {
  const eval_ep_t *e = sl->ep;
  double wall = ms3((eval_now() - sl->wall0) * 1000.0);
  char traj[64];
  json_t *rec;
  eval_llm_take(sl);
  snprintf(traj, sizeof traj, "trajectories/%06lld.jsonl", e->index);
  rec = json_pack(
      "{sI so sI sI sI sf sO sb sb sb sI so sf sf s{sIsIsIsI} so}",
      "episode", (json_int_t)e->index, "task",
      e->task_id ? json_string(e->task_id) : json_null(), "repeat",
      (json_int_t)e->repeat, "seed", (json_int_t)e->seed, "steps",
      (json_int_t)sl->steps, "reward", sl->reward, "rubrics", sl->rubrics,
      "done", sl->done, "truncated", sl->truncated, "success",
      success_default(sl), "invalid_actions", (json_int_t)sl->invalid,
      "error", record_error(sl),
      "wall_ms", wall, "cpu_ms",
      ms3((sl->run->cpu_share - sl->cpu0) * 1000.0), "llm", "calls",
      (json_int_t)sl->llm[0], "failures", (json_int_t)sl->llm[1],
      "prompt_tokens", (json_int_t)sl->llm[2], "completion_tokens",
      (json_int_t)sl->llm[3], "trajectory",
      sl->run->cfg->trajectories && !sl->traj_lost ? json_string(traj)
                                                   : json_null());
  return rec;
}

/* ---- trajectories ---------------------------------------------------------- */

static void traj_path(const eval_slot_t *sl, char *path, size_t n) {
  snprintf(path, n, "%s/trajectories/%06lld.jsonl", sl->run->cfg->out,
           sl->ep->index);
}

/* The trajectory is lost (errno says why): counted, the first said. */
static void traj_lost(eval_slot_t *sl, const char *what, const char *path) {
  eval_run_t *r = sl->run;
  if (r->traj_lost++ == 0)
    snprintf(r->traj_err, sizeof r->traj_err, "cannot %s %s: %s", what,
             path, strerror(errno));
  sl->traj_lost = 1;
}

void eval_traj_open(eval_slot_t *sl) {
  char path[4400];
  sl->traj_lost = 0;
  if (!sl->run->cfg->trajectories) return;
  traj_path(sl, path, sizeof path);
  sl->traj = fopen(path, "w");
  /* Out of file descriptors (a high --concurrency), a full disk: the
   * episode runs on, its record says it has no trajectory. */
  if (sl->traj == NULL) traj_lost(sl, "open", path);
}

/* The last line of an episode that failed after its reset answered:
 * why it ended, {"end": "error", "steps": N, "error": {class, message}}
 * (the steps' lines alone do not say it: the failing call wrote none). */
static void traj_end(eval_slot_t *sl) {
  json_t *line = json_pack("{sssIso}", "end", "error", "steps",
                           (json_int_t)sl->steps, "error", record_error(sl));
  char *s = line ? eval_json_dumps(line) : NULL;
  if (s != NULL) fprintf(sl->traj, "%s\n", s);
  free(s);
  json_decref(line);
}

void eval_traj_close(eval_slot_t *sl) {
  char path[4400];
  int bad;
  if (sl->traj == NULL) return;
  if (!sl->reset_written)
    eval_traj_reset_failed(sl); /* line 1 says the error */
  else if (sl->err_class[0] != '\0')
    traj_end(sl);
  errno = EIO; /* what ferror alone says */
  bad = ferror(sl->traj);
  bad = fclose(sl->traj) != 0 || bad;
  sl->traj = NULL;
  if (!bad) return;
  traj_path(sl, path, sizeof path);
  traj_lost(sl, "write", path);
  unlink(path); /* a part of it: the record names none */
}

int eval_traj_report(const eval_run_t *r) {
  if (r->traj_lost == 0) return 0;
  fprintf(stderr, "ludo eval: warning: %lld trajectories could not be "
          "written (the first: %s); their records say \"trajectory\": "
          "null\n", r->traj_lost, r->traj_err);
  return 1;
}

void eval_reset_opts(const eval_ep_t *e, ludo__cli_buf_t *b) {
  ludo__cli_buf_printf(b, "{\"seed\":%llu", (unsigned long long)e->seed);
  if (e->task_index >= 0) {
    ludo__cli_buf_printf(b, ",\"split\":");
    ludo__cli_buf_json_string(b, e->split);
    ludo__cli_buf_printf(b, ",\"index\":%lld", e->task_index);
  }
  ludo__cli_buf_printf(b, "}");
}

/* Line 1: the reset's options and result. */
void eval_traj_reset(eval_slot_t *sl, const char *opts, const char *data,
                       size_t len) {
  if (sl->traj == NULL || len < 2 || data[0] != '{') return;
  fprintf(sl->traj, "{\"reset\":%s,%.*s\n", opts, (int)len - 1, data + 1);
  sl->reset_written = 1;
}

/* Line 1 of an episode that failed before its reset answered: the reset's
 * options and the error. */
void eval_traj_reset_failed(eval_slot_t *sl) {
  ludo__cli_buf_t opts = {0};
  json_t *line;
  char *s;
  eval_reset_opts(sl->ep, &opts);
  line = json_pack("{s o s o}", "reset", json_loadb(opts.p, opts.len, 0,
                                                    NULL),
                   "error", sl->err_class[0]
                                ? json_pack("{ssss}", "class", sl->err_class,
                                            "message",
                                            sl->err.p ? sl->err.p : "")
                                : json_null());
  s = line ? eval_json_dumps(line) : NULL;
  if (s != NULL) fprintf(sl->traj, "%s\n", s);
  sl->reset_written = 1;
  free(s);
  json_decref(line);
  ludo__cli_buf_free(&opts);
}

/* A step: its action, then the result's fields. */
void eval_traj_step(eval_slot_t *sl, const char *data, size_t len) {
  char *text = NULL;
  if (sl->traj == NULL || len < 2 || data[0] != '{') return;
  if (sl->text != NULL) text = json_dumps(sl->text, JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));
  fprintf(sl->traj, "{\"step\":%lld,\"action\":%.*s,%s%s%s%.*s\n",
          sl->steps, (int)sl->action.len, sl->action.p,
          text ? "\"text\":" : "", text ? text : "", text ? "," : "",
          (int)len - 1, data + 1);
  free(text);
}

/* An invalid action: the model's text (if any) and why. */
void eval_traj_invalid(eval_slot_t *sl, json_t *text, const char *why) {
  json_t *line, *action = NULL;
  char *s;
  if (sl->traj == NULL) return;
  /* Any JSON the policy gave (null, a number, a list), else its text. */
  if (sl->action.len)
    action = json_loadb(sl->action.p, sl->action.len, JSON_DECODE_ANY, NULL);
  if (action == NULL)
    action = sl->action.len ? json_stringn(sl->action.p, sl->action.len)
                            : NULL;
  if (action == NULL) action = json_null(); /* none, or not UTF-8 */
  line = json_pack("{sIsosbsOss}", "step", (json_int_t)sl->steps, "action",
                   action, "invalid", 1, "text", text ? text : json_null(),
                   "error", why);
  s = line ? eval_json_dumps(line) : NULL;
  if (s != NULL) fprintf(sl->traj, "%s\n", s);
  free(s);
  json_decref(line);
}
