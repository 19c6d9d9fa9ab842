/* eval_slots.c - the slots of `ludo eval`: C of them, each with its
 * policy script (ludo.eval.policy), a script for the run file's success
 * function when it has one, and against a server a client; opened before
 * the loop runs and closed after it. */
#include <stdlib.h>
#include <string.h>

#include "cli/eval.h"

/* ---- slots ---------------------------------------------------------------- */

/* The init arguments of ludo.eval.policy: [spec, info]. */
static void policy_spec(const eval_cfg_t *cfg, const char *info,
                        size_t info_len, ludo__cli_buf_t *b) {
  ludo__cli_buf_printf(b, "[{\"kind\":\"%s\"",
                       cfg->policy_llm         ? "llm"
                       : cfg->policy_mod[0]    ? "lua"
                                               : "random");
  if (cfg->policy_mod[0] && !cfg->policy_llm) {
    ludo__cli_buf_printf(b, ",\"module\":");
    ludo__cli_buf_json_string(b, cfg->policy_mod);
  }
  if (cfg->policy_llm) {
    ludo__cli_buf_printf(b, ",\"runfile\":");
    ludo__cli_buf_json_string(b, cfg->runfile_mod);
  }
  ludo__cli_buf_printf(b, "},%.*s]", (int)info_len, info);
}

static int policy_open(eval_run_t *r, eval_slot_t *sl) {
  const eval_cfg_t *cfg = r->cfg;
  const char *dir = cfg->policy_llm     ? cfg->runfile_dir
                    : cfg->policy_mod[0] ? cfg->policy_dir
                                         : NULL;
  ludo__cli_buf_t args = {0};
  const char *o;
  size_t n;
  int rc;
  if (ludo_script_open(r->rt, "ludo.eval.policy", dir, &sl->policy) != 0) {
    ludo__cli_error("policy: %s", ludo_runtime_errmsg(r->rt));
    return -1;
  }
  policy_spec(cfg, r->info, r->info_len, &args);
  rc = ludo_script_call(sl->policy, "init", args.p, args.len, &o, &n);
  ludo__cli_buf_free(&args);
  if (rc != 0) { /* the message's first line: the traceback below it is
                    ludo.eval.policy's own */
    const char *m = ludo_script_errmsg(sl->policy);
    ludo__cli_error("policy: %.*s", (int)strcspn(m, "\n"), m);
    return -1;
  }
  if (cfg->success_kind == EVAL_SUCCESS_FN &&
      ludo_script_open(r->rt, "ludo.eval.runfile", cfg->runfile_dir,
                       &sl->judge) != 0) {
    ludo__cli_error("success: %s", ludo_runtime_errmsg(r->rt));
    return -1;
  }
  return 0;
}

static int client_open(eval_run_t *r, eval_slot_t *sl) {
  ludo_client_options_t o;
  ludo_client_options_init(&o);
  o.token = r->cfg->token && *r->cfg->token ? r->cfg->token : NULL;
  if (ludo_client_connect(r->rt, r->cfg->env, &o, &sl->client) != 0) {
    ludo__cli_error("%s", ludo_runtime_errmsg(r->rt));
    return -1;
  }
  return 0;
}

int eval_slots_open(eval_run_t *r) {
  size_t i, left = r->plan->n;
  for (i = 0; i < r->plan->n; i++) left -= r->plan->eps[i].done != 0;
  r->nslots = (size_t)r->cfg->concurrency < left ? (size_t)r->cfg->concurrency
                                                 : left;
  r->slots = calloc(r->nslots + 1, sizeof *r->slots);
  for (i = 0; i < r->nslots; i++) {
    eval_slot_t *sl = &r->slots[i];
    sl->run = r;
    if (policy_open(r, sl) != 0) return -1;
    if (r->cfg->remote && client_open(r, sl) != 0) return -1;
  }
  return 0;
}

void eval_slots_close(eval_run_t *r) {
  size_t i;
  for (i = 0; r->slots != NULL && i < r->nslots; i++) {
    eval_slot_t *sl = &r->slots[i];
    ludo_script_free(sl->policy);
    ludo_script_free(sl->judge);
    ludo_client_close(sl->client);
    json_decref(sl->rubrics);
    json_decref(sl->text);
    ludo__cli_buf_free(&sl->err);
    ludo__cli_buf_free(&sl->args);
    ludo__cli_buf_free(&sl->last);
    ludo__cli_buf_free(&sl->action);
    ludo__cli_buf_free(&sl->refusal);
  }
  free(r->slots);
  r->slots = NULL;
}
