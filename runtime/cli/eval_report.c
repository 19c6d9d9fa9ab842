/* eval_report.c - summary.json and report.html of a run: the records go
 * to ludo.eval.report (summary(run, results, timing) and html(run,
 * summary_text, results), docs/eval-report.md) in a script of a runtime
 * of its own, with room for a large run: a memory cap of 4 GiB, a CPU
 * budget of 10 minutes, inputs up to 1 GiB. Also what the timing counts
 * (eval_timing_count). */
#include <stdlib.h>
#include <string.h>

#include "cli/eval.h"

#define REPORT_CAP ((size_t)4 << 30)
#define REPORT_BUDGET_MS (10u * 60u * 1000u)
#define REPORT_MAX_INPUT ((size_t)1 << 30)

/* Calls fn with `args` (the text of a JSON array); the result, a JSON
 * string, decoded (caller frees), or NULL after saying why. */
static char *call_text(ludo_script_t *sc, const char *fn,
                       const ludo__cli_buf_t *args, size_t *len) {
  const char *o;
  size_t n;
  json_t *res;
  char *text = NULL;
  if (ludo_script_call(sc, fn, args->p, args->len, &o, &n) != 0) {
    ludo__cli_error("ludo.eval.report.%s: %s", fn, ludo_script_errmsg(sc));
    return NULL;
  }
  res = json_loadb(o, n, JSON_DECODE_ANY, NULL); /* json_is_* evaluates
                                                    its argument twice */
  if (!json_is_string(res)) {
    ludo__cli_error("ludo.eval.report.%s returned no text", fn);
    json_decref(res);
  } else {
    *len = json_string_length(res);
    text = malloc(*len + 1);
    memcpy(text, json_string_value(res), *len + 1);
    json_decref(res);
  }
  return text;
}

/* Appends the JSON text of `v` to b. */
static void add_json(ludo__cli_buf_t *b, json_t *v) {
  char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
  ludo__cli_buf_printf(b, "%s", t ? t : "null");
  free(t);
}

static int write_both(ludo_script_t *sc, const char *dir, json_t *run,
                      const char *results, size_t rlen, json_t *timing) {
  ludo__cli_buf_t args = {0};
  size_t n = 0, m = 0;
  char *summary, *html = NULL;
  int rc = -1;
  ludo__cli_buf_printf(&args, "[");
  add_json(&args, run);
  ludo__cli_buf_printf(&args, ",%.*s,", (int)rlen, results);
  add_json(&args, timing);
  ludo__cli_buf_printf(&args, "]");
  summary = call_text(sc, "summary", &args, &n);
  if (summary != NULL && eval_write_file(dir, "summary.json", summary, n) == 0) {
    json_t *s = json_stringn(summary, n);
    ludo__cli_buf_reset(&args);
    ludo__cli_buf_printf(&args, "[");
    add_json(&args, run);
    ludo__cli_buf_printf(&args, ",");
    add_json(&args, s);
    ludo__cli_buf_printf(&args, ",%.*s]", (int)rlen, results);
    json_decref(s);
    html = call_text(sc, "html", &args, &m);
    rc = html ? eval_write_file(dir, "report.html", html, m) : -1;
  }
  ludo__cli_buf_free(&args);
  free(summary);
  free(html);
  return rc;
}

static const char *count_attempt(void *ud, const eval_line_t *l) {
  eval_timing_t *t = ud;
  if (!l->rerun) { /* cancelled or lost episodes are not attempts */
    t->episodes++;
    t->steps += l->steps;
  }
  return NULL;
}

int eval_timing_count(const char *dir, long long offset, eval_timing_t *t) {
  t->episodes = t->steps = 0;
  return eval_results_follow(dir, &offset, count_attempt, t);
}

int eval_report_write(const char *dir, json_t *run, const char *results,
                      size_t results_len, const eval_timing_t *t) {
  ludo_options_t o;
  ludo_runtime_t *rt = NULL;
  ludo_script_t *sc = NULL;
  json_t *timing;
  int rc = -1;
  ludo_options_init(&o);
  o.module_path = ludo__cli_root();
  o.memory_cap = REPORT_CAP;
  o.cpu_budget_ms = REPORT_BUDGET_MS;
  o.max_input_bytes = REPORT_MAX_INPUT;
  o.wall_limit_ms = 0;
  o.prewarm = 0;
  if (ludo_runtime_new(&rt, &o) != 0) {
    ludo__cli_error("report: cannot start a runtime");
    return -1;
  }
  if (ludo_script_open(rt, "ludo.eval.report", NULL, &sc) != 0) {
    ludo__cli_error("report: %s", ludo_runtime_errmsg(rt));
  } else {
    timing = json_pack("{sfsssIsI}", "wall_s", t->wall_s, "started_at",
                       t->started_at, "episodes", (json_int_t)t->episodes,
                       "steps", (json_int_t)t->steps);
    rc = write_both(sc, dir, run, results, results_len, timing);
    json_decref(timing);
  }
  ludo_script_free(sc);
  ludo_runtime_free(rt);
  return rc;
}
