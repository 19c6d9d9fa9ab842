/* eval.h - `ludo eval`: the parts of the evaluation runner (docs/eval.md)
 * and what they share. The command is an embedder of ludo.h like any
 * other: it reads its run file and drives its policies as scripts, runs
 * the episodes as concurrent sessions (or clients of a server) on one
 * loop, and writes the output folder with jansson.
 *
 *   eval.c          the command: options, setup, the loop, exit status
 *   eval_config.c   flags and run file -> the resolved configuration
 *   eval_plan.c     the episodes: index, task, repeat, seed; shards
 *   eval_episode.c  the episodes as chains of calls on the loop
 *   eval_slots.c    the slots: policy scripts, clients
 *   eval_record.c   an episode's record and trajectory
 *   eval_result.c   a step's reward, done and rubric scores, read from
 *                   its JSON text
 *   eval_output.c   the output folder: run.json, results.jsonl, resume,
 *                   trajectories
 *   eval_progress.c the progress line
 *   eval_workers.c  --workers: the episodes spread over worker processes
 *   eval_report.c   summary.json and report.html (ludo.eval.report)
 *   eval_json.c     the JSON text of records and trajectory lines
 *   eval_scan.c     a line of results.jsonl read back and checked
 *   eval_merge.c    `ludo eval merge`: shard folders -> one */
#ifndef LUDO_CLI_EVAL_H
#define LUDO_CLI_EVAL_H

#include <jansson.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <uv.h>

#include "cli/cli.h"
#include "ludo.h"

/* ---- JSON text (eval_json.c) ----------------------------------------- */

/* Appends v's JSON text as records, trajectory lines and merged results
 * are written: compact, members in their order, reals in the shortest
 * form that reads back as the same double (0.3, and 0.29999999999999993
 * too: the text the summary, the success rule, --resume and merge read
 * is the value the run computed). */
void eval_json_add(ludo__cli_buf_t *b, json_t *v);
/* The same as a new string (caller frees; NULL when v is NULL). */
char *eval_json_dumps(json_t *v);

/* ---- configuration (eval_config.c) ----------------------------------- */

enum { EVAL_SUCCESS_DEFAULT, EVAL_SUCCESS_THRESHOLD, EVAL_SUCCESS_FN };

/* "fnv1a64:" and 16 hex digits, with the NUL. */
#define EVAL_DIGEST_LEN 25

/* The digest of a file, or of a folder's files (eval_digest.c): what
 * run.json's `code` records, so --resume and merge see edited code.
 * Returns 0, or -1 when the path cannot be read (or is too big: more than
 * 10,000 files or 256 MiB). */
int eval_digest(const char *path, char out[EVAL_DIGEST_LEN]);
/* The digest of the Lua files under `dir` (every *.lua file, hidden
 * entries, folders that cannot be read and eval output folders left
 * out): a policy's code, the modules its require can load from its
 * folder. Returns 0, or -1 when `dir` cannot be read or is too big (more
 * than 10,000 Lua files, 256 MiB or 200,000 entries). */
int eval_digest_lua(const char *dir, char out[EVAL_DIGEST_LEN]);

/* The run as resolved: flags over the run file over the defaults. */
typedef struct eval_cfg_s {
  char env[4096];          /* a path (resolved, absolute when it
                              exists) or a ws:// URL */
  int remote;
  char env_digest[EVAL_DIGEST_LEN];    /* "" for a URL or unreadable */
  char policy_digest[EVAL_DIGEST_LEN]; /* the Lua files of the policy's
                                          folder (a Lua policy's, or the
                                          run file's for an LLM policy);
                                          "" for the random policy */
  char success_digest[EVAL_DIGEST_LEN]; /* a success function's code: the
                                         Lua files of the run file's folder */
  char runfile_dir[4096];  /* the run file's folder, "" without one */
  char runfile_mod[256];   /* its module name */
  char policy_dir[4096];   /* a Lua policy's folder and module name, */
  char policy_mod[256];    /* "" for the random policy */
  int policy_llm;          /* the run file's LLM policy */
  char split[128];         /* tasks: a split ("" for seeded episodes,
                              or for ids looked up in every split) */
  long long task_count;    /* -1: every task of the split */
  json_t *task_ids;        /* a list of task ids, or NULL */
  long long episodes, repeats, concurrency, max_steps, seed;
  long long budget_ms, cap_mb;
  json_t *pass_k;          /* array of k */
  char out[4096];
  int success_kind;
  double success_threshold;
  int resume, trajectories, quiet;
  long long shard_index, shard_count; /* count 0: no shard */
  long long workers;       /* worker processes (1: this one runs all) */
  int worker;              /* this process is a worker: its episodes come
                              on stdin, the lock as fd 3 (eval_workers.c) */
  const char *token;
  json_t *policy_desc;     /* what run.json says of the policy */
} eval_cfg_t;

/* 1 when the run names tasks (a split, or task ids). */
static inline int eval_has_tasks(const eval_cfg_t *cfg) {
  return cfg->split[0] != '\0' || cfg->task_ids != NULL;
}

/* The options of `ludo eval` (its help prints them). */
extern const ludo__cli_opt_t ludo__cli_eval_opts[];

/* Reads argv (after "eval") into cfg: the run file (read in a sandboxed
 * script of `rt`) and the flags. Returns -1 to go on, or the exit status
 * after saying what was wrong (2 for usage, 1 for a bad run file). */
int eval_config(const ludo__cli_cmd_t *cmd, int argc, char **argv,
                eval_cfg_t *cfg);
void eval_config_free(eval_cfg_t *cfg);

/* run.json's object for cfg and the plan's episode count (new ref). */
json_t *eval_run_json(const eval_cfg_t *cfg, long long episodes_total);

/* ---- the episodes (eval_plan.c) --------------------------------------- */

typedef struct eval_ep_s {
  long long index;         /* in the whole run (not the shard) */
  long long repeat;
  uint64_t seed;           /* < 2^53 */
  long long task_index;    /* in the split, -1 for seeded episodes */
  char *split;             /* the task's split (owned), NULL for seeded */
  char *task_id;           /* NULL for seeded episodes (owned) */
  int done;                /* has a finished or failed record */
  int error, has_traj;     /* of that record: an error, a trajectory */
  double reward;           /* and its reward */
} eval_ep_t;

typedef struct eval_plan_s {
  eval_ep_t *eps;          /* this shard's episodes, by index */
  size_t n;
  long long total;         /* episodes of the whole run */
} eval_plan_t;

/* The seed of episode `index` of a run seeded `seed`: splitmix64 of the
 * two, kept below 2^53 (exact in JSON). */
uint64_t eval_episode_seed(long long seed, long long index);

/* Enumerates the episodes (listing the split's tasks through `s`, a
 * session, when the run names tasks locally). Returns 0, or -1 after
 * saying what was wrong. */
int eval_plan(const eval_cfg_t *cfg, ludo_session_t *s, eval_plan_t *plan);
void eval_plan_free(eval_plan_t *plan);

/* Finds episode `index` in the plan (NULL when not this shard's). */
eval_ep_t *eval_plan_find(eval_plan_t *plan, long long index);

/* ---- output (eval_output.c) ------------------------------------------- */

typedef struct eval_out_s {
  char dir[4096];
  int results;             /* results.jsonl, O_APPEND (-1: closed) */
  int lock;                /* OUT/.lock, held for the run (> 0) */
  int broken;              /* an append failed (said): no more */
} eval_out_t;

/* The lock file of an output folder: one process writes into it. */
#define EVAL_LOCK ".lock"

/* A worker process's exit status when its records are complete but some
 * of its trajectories could not be written (it said so): the parent exits
 * 1 without asking for a --resume that has nothing to run. */
#define EVAL_EXIT_TRAJECTORIES 3

/* The exit status of a run that lost episodes to a server outage
 * (eval_class_lost): EX_TEMPFAIL of sysexits.h, "try again":
 * --resume runs them. */
#define EVAL_EXIT_LOST 75

/* Creates `dir` and takes DIR/.lock (flock LOCK_EX | LOCK_NB) into *fd:
 * held until the fd is closed. Returns 0, or -1 after saying why (another
 * process holds it). */
int eval_out_lock(const char *dir, int *fd);

/* Prepares cfg->out: takes its lock (eval_out_lock), creates it (or
 * takes over a folder a failed setup left without records), or with
 * --resume checks its run.json
 * against `run` and marks the plan's episodes already done (reading
 * results.jsonl and cutting a torn last line); writes run.json. Returns 0
 * or -1 after saying what was wrong. */
int eval_out_open(eval_out_t *o, const eval_cfg_t *cfg, json_t *run,
                  eval_plan_t *plan, long long *already);

/* Makes `dir` an empty folder to write into: refuses one that holds
 * anything, saying `what_to_do` (a run: "give --resume ..."; a merge,
 * which has no --resume: "merge into a new or empty folder ..."). Returns
 * 0 or -1 after saying why. */
int eval_out_fresh(const char *dir, const char *what_to_do);

/* Appends one record (a JSON object; steals nothing) as one line, whole
 * or not at all: a write that fails (a full disk) cuts results.jsonl back
 * to its size before it, says so naming the file and the OS error, and
 * marks the output broken. Returns 0, or -1 (broken: every later append
 * returns -1 at once, saying nothing). */
int eval_out_append(eval_out_t *o, json_t *record);
/* Opens cfg->out for a worker (eval_workers.c): the parent took the lock,
 * wrote run.json and read the records; results.jsonl is opened to append.
 * Returns 0 or -1 after saying why. */
int eval_out_open_worker(eval_out_t *o, const eval_cfg_t *cfg);
/* Closes results.jsonl; eval_out_unlock then lets the lock go. */
void eval_out_close(eval_out_t *o);
void eval_out_unlock(eval_out_t *o);

/* Reads DIR/results.jsonl: every record into `into` (an array), the last
 * record of each episode winning. A torn last line (no '\n') is left out
 * and, with `repair`, cut from the file. Returns 0, or -1 after saying
 * what was wrong (a malformed line before the last). */
int eval_results_read(const char *dir, int repair, json_t *into);

/* Appends to `d` the keys run objects a and b differ in ("execution"
 * aside, and "shard" with but_shard), comma-separated. */
void eval_run_diff(json_t *a, json_t *b, int but_shard, ludo__cli_buf_t *d);

/* One line of results.jsonl as the quick scan reads it. */
typedef struct {
  long long episode;
  long long seed;          /* -1 when the record has none */
  int rerun;               /* failed in a way --resume runs again: Ctrl-C
                              (ECANCELED) or a server outage
                              (eval_class_lost) */
  int error;               /* has an error */
  int cancelled;           /* ... ECANCELED: Ctrl-C stopped it */
  int has_traj;            /* names its own trajectory file */
  int traj_bad;            /* names anything else: refused by
                              eval_record_check */
  long long steps;         /* 0 when the record has none */
  double reward;
  const char *line;        /* the line, without its '\n' */
  size_t len;
} eval_line_t;

/* Reads the line l->line[0..l->len) (eval_scan.c) into *l: strict JSON
 * (as ludo.json decodes it), an object whose fields have the types ludo
 * writes (episode, seed, reward, steps, error and success present).
 * Returns NULL, or why the line is not a record (in why[0..n): "the field
 * \"reward\" must be a number, not a string", "malformed JSON: ... at
 * column 8542"). */
const char *eval_scan_line(eval_line_t *l, char *why, size_t n);

/* 1 for an error class --resume runs again (see eval_line_t.rerun). */
int eval_class_rerun(const char *cls);
/* 1 for the error class of a server outage, not the policy's failure
 * (ECONNECT, EDISCONNECTED, ENOREPLY, ECAPACITY): the episode is lost. */
int eval_class_lost(const char *cls);

/* Reads DIR/results.jsonl quickly, for --resume: fn(ud, line) for each
 * complete line, in order; fn returns NULL to go on, or why the line is
 * refused (then the scan stops, saying so with the line's number). A torn
 * last line is left out (with `repair` cut from the file). Returns 0, or
 * -1 after saying what was wrong. */
typedef const char *(*eval_scan_fn)(void *ud, const eval_line_t *l);
int eval_results_scan(const char *dir, int repair, eval_scan_fn fn,
                      void *ud);
/* What --resume and merge check of each record, in the order of the
 * lines: its episode is one of `plan`'s, with the plan's seed, not
 * after a final record of that episode (only a record to run again,
 * cancelled or lost by the transport, is followed by another), and its
 * trajectory is null or its own file (trajectories/NNNNNN.jsonl: a path
 * from a record is never followed). Marks the episode (done, error,
 * has_traj, reward) as the line says. Returns NULL, or why the line is
 * refused (in why[0..n)). */
const char *eval_record_check(eval_plan_t *plan, const eval_line_t *l,
                              char *why, size_t n);

/* Calls fn for each complete line of results.jsonl from byte *offset on,
 * and moves *offset past the last one (a line being written is read on
 * the next call). Returns 0, or -1 after saying what was wrong. */
int eval_results_follow(const char *dir, long long *offset, eval_scan_fn fn,
                        void *ud);

/* The folder's records as the text of one JSON array (the last record of
 * each episode, ordered by episode) appended to `text`, without parsing
 * them; *count records. Returns 0 or -1 after saying what was wrong. */
int eval_results_text(const char *dir, ludo__cli_buf_t *text,
                      long long *count);

/* Reads DIR/run.json (new ref, or NULL after saying why). */
json_t *eval_run_read(const char *dir);

/* Writes text to DIR/name (replacing it). Returns 0 or -1. */
int eval_write_file(const char *dir, const char *name, const char *text,
                    size_t len);


/* ---- step results (eval_result.c) ------------------------------------ */

typedef struct {
  double reward;
  int has_reward, done;
  const char *reward_text;  /* the reward's text, when it is a short
                               decimal read exactly (else NULL) */
  size_t reward_len;
  const char *obs;          /* the observation's text, when there is one */
  size_t obs_len;           /* (else NULL and 0) */
} eval_step_t;

/* Called for each rubric score: its path (not NUL-terminated) and value. */
typedef void (*eval_score_fn)(void *ud, const char *path, size_t n,
                              double score);

/* Reads a step's result (JSON text): reward, done, the observation's
 * text, and fn(ud, ...) (NULL: none) per score of metadata.rubrics,
 * without building the value. Returns 0, or
 * -1 when the text holds what the walk does not read (an escaped key,
 * malformed JSON): then read it with jansson instead (fn may have run for
 * some scores already). */
int eval_step_read(const char *json, size_t len, eval_step_t *r,
                   eval_score_fn fn, void *ud);

/* ---- progress (eval_progress.c) --------------------------------------- */

typedef struct eval_progress_s {
  int mode;                /* 0 none, 1 terminal line, 2 plain lines */
  uv_timer_t timer;
  double started, last_plain;
  long long total, done, errors, skipped;
  long long cancelled;     /* stopped by Ctrl-C: neither done nor errors */
  long long lost;          /* lost to a server outage (eval_class_lost):
                              neither, and the run ends
                              asking for --resume */
  double reward_sum;
  long long reward_n;
  int drawn;               /* a terminal line is on screen */
} eval_progress_t;

void eval_progress_start(eval_progress_t *p, uv_loop_t *loop, int quiet,
                         long long total, long long skipped);
/* Counts the plan's episodes done before this run (--resume) in the
 * mean reward and the errors. */
void eval_progress_prior(eval_progress_t *p, const eval_plan_t *plan);
/* One episode ended (error: it failed; cancelled: by Ctrl-C, lost: by
 * the transport, neither of which is an error, and --resume runs them
 * again). */
void eval_progress_episode(eval_progress_t *p, double reward, int error,
                           int cancelled, int lost);
/* Stops the timer and ends the line. */
void eval_progress_stop(eval_progress_t *p);

/* ---- the run (eval_episode.c) ----------------------------------------- */

typedef struct eval_run_s eval_run_t;
typedef struct eval_slot_s eval_slot_t;

struct eval_run_s {
  const eval_cfg_t *cfg;
  uv_loop_t *loop;
  ludo_runtime_t *rt;
  ludo_env_t *env;         /* NULL when remote */
  const char *info;        /* the environment's description */
  size_t info_len;
  eval_plan_t *plan;
  eval_out_t *out;
  eval_progress_t progress;
  eval_slot_t *slots;
  size_t nslots, next;     /* next plan entry to start */
  size_t active;           /* slots with an episode */
  int stopping;            /* Ctrl-C: cancel, start nothing */
  int failed;              /* a write failed: stop */
  long long traj_lost;     /* trajectories not written (their records say
                              null): the run exits 1 */
  char traj_err[320];      /* the first of those failures, said */
  double cpu_share;        /* CPU per episode in flight, accumulated */
  double cpu_last;         /* thread CPU time at the last update (s) */
  long long finished;
};

/* Set by the first Ctrl-C (SIGINT, SIGTERM), in the signal handler: an
 * episode failing from then on is recorded as ECANCELED. */
extern volatile sig_atomic_t eval_interrupted;

/* What a slot waits for. */
enum { P_NONE, P_OPEN, P_RESET, P_POLICY, P_STEP, P_JUDGE };

/* Where the i-th rubric score of a step went last time (eval_episode.c):
 * its path and its sum in the slot's `rubrics`. */
#define EVAL_SUMS 16
typedef struct {
  char path[48];
  size_t len;
  json_t *sum;             /* borrowed from `rubrics`; NULL: none */
} eval_sum_t;

struct eval_slot_s {
  eval_run_t *run;
  ludo_script_t *policy;   /* ludo.eval.policy */
  ludo_script_t *judge;    /* ludo.eval.runfile, for a success function */
  ludo_client_t *client;   /* against a server */
  ludo_session_t *s;       /* locally: the episode's session */
  eval_ep_t *ep;           /* NULL: idle */
  int pending, cancelled;
  long long steps, invalid;
  double reward, wall0, cpu0;
  int done, truncated, has_reward;
  int nonfinite;           /* a rubric score's sum overflowed */
  double last_reward;
  char reward_arg[32];     /* last_reward as the policy gets it */
  size_t reward_arg_len;
  json_t *rubrics;         /* per rubric path: the sum of its scores */
  eval_sum_t sums[EVAL_SUMS];
  char err_class[32];      /* "" while no error */
  ludo__cli_buf_t err, args, last, action, refusal;
  size_t obs_off, obs_len; /* the observation's place in `last`, when */
  int has_obs;             /* has_obs */
  json_t *text;            /* the model's text of the action, or NULL */
  FILE *traj;
  int reset_written;       /* the trajectory's line 1 is written */
  int traj_lost;           /* it could not be opened or written */
  json_t *rec;             /* the record, while the success function runs */
  double llm[4];           /* the episode's LLM usage: calls, failures,
                              prompt and completion tokens */
  double llm_policy[4];    /* the policy's usage when last taken */
  double llm_session[4];   /* the session's usage when last taken */
};

/* Opens the slots (a policy script each, and for a server a client).
 * Returns 0 or -1 after saying what was wrong. */
int eval_slots_open(eval_run_t *r);
/* Starts the first episodes; the loop does the rest. */
void eval_slots_start(eval_run_t *r);
/* Ctrl-C: cancels the episodes in flight (recorded as ECANCELED). */
void eval_slots_cancel(eval_run_t *r);
void eval_slots_close(eval_run_t *r);

/* ---- records and trajectories (eval_record.c) ------------------------- */

/* Shares the thread's CPU time since the last update among the episodes
 * in flight (at each start and end of an episode). */
void eval_cpu_update(eval_run_t *r);
/* The episode's LLM usage (sl->llm): eval_llm_begin starts it at 0 (what
 * the policy spent before is not the episode's), eval_llm_session when
 * the episode's session is open (what it spent before neither), and
 * eval_llm_take adds what the policy and the session spent since the
 * last take: called before either is freed or closed (Ctrl-C) and when
 * the record is made, so a record counts what its episode spent, once. */
void eval_llm_begin(eval_slot_t *sl);
void eval_llm_session(eval_slot_t *sl);
void eval_llm_take(eval_slot_t *sl);
/* Records the episode's error (the first stands). */
void eval_record_error(eval_slot_t *sl, int status, const char *msg,
                       size_t len);
/* The episode's record (new ref). */
json_t *eval_record_new(eval_slot_t *sl);
/* The trajectory file: opened at the start, the reset, each step, each
 * invalid action (the model's text, or NULL, and why). */
void eval_traj_open(eval_slot_t *sl);
/* Closes it at the episode's end (writing line 1 if the reset never
 * answered, else for an episode that failed a last line saying why it
 * ended). One that could not be opened or written is removed and
 * counted in the run (sl->traj_lost: the record says null). */
void eval_traj_close(eval_slot_t *sl);
/* Says how many trajectories the run lost and the first failure (a
 * warning on stderr). Returns 1 when it lost any, else 0. */
int eval_traj_report(const eval_run_t *r);
void eval_traj_reset(eval_slot_t *sl, const char *opts, const char *data,
                     size_t len);
/* Line 1 when the episode failed before the reset answered: the reset's
 * options and the error (at the episode's end). */
void eval_traj_reset_failed(eval_slot_t *sl);
/* The reset's options of episode e ({"seed", "split", "index"}) appended
 * to b as JSON text. */
void eval_reset_opts(const eval_ep_t *e, ludo__cli_buf_t *b);
void eval_traj_step(eval_slot_t *sl, const char *data, size_t len);
void eval_traj_invalid(eval_slot_t *sl, json_t *text, const char *why);

/* ---- summary and report (eval_report.c) ------------------------------- */

/* What summary.json's timing measures (docs/eval-report.md): the wall
 * time of the process(es) that ran episodes into the folder last, and the
 * attempts (finished or failed episodes) and their steps that they ran,
 * so the throughput is theirs alone, whatever earlier processes (a
 * resumed run's) wrote. */
typedef struct {
  double wall_s;
  const char *started_at;  /* borrowed */
  long long episodes, steps;
} eval_timing_t;

/* Counts the attempts and their steps in DIR/results.jsonl from byte
 * `offset` on (the records this process's run wrote) into t. Returns 0
 * or -1 after saying what was wrong. */
int eval_timing_count(const char *dir, long long offset, eval_timing_t *t);

/* Writes summary.json and report.html into `dir` from run.json's object
 * and the records (the text of a JSON array), with R's ludo.eval.report in a runtime of
 * its own. Returns 0 or -1 after saying what was wrong. */
int eval_report_write(const char *dir, json_t *run, const char *results,
                      size_t results_len, const eval_timing_t *timing);

/* ---- worker processes (eval_workers.c) ------------------------------- */

/* How many worker processes the run gets: cfg->workers, at most one per
 * episode left to run; 1 (no workers) in a worker itself. */
long long eval_workers_count(const eval_cfg_t *cfg, const eval_plan_t *plan);
/* Runs the episodes of `plan` not done on `n` worker processes (this
 * program, `ludo eval` with the same arguments, `argv` from "eval" on)
 * and shows their progress from results.jsonl until every one exited.
 * `lock` is the output folder's lock, which they inherit. Returns 0 when
 * all ended with status 0, 130 when interrupted, 1 when one failed (or
 * could not be started: said). */
int eval_workers_run(const eval_cfg_t *cfg, uv_loop_t *loop,
                     const eval_plan_t *plan, long long n, int argc,
                     char **argv, int lock, eval_progress_t *progress);
/* Ctrl-C in the parent: asks every worker to stop (SIGINT; they record
 * their episodes in flight as cancelled). Async-signal-safe. */
void eval_workers_signal(void);
/* A worker's episodes: reads their indices (stdin, one per line) and
 * marks every other episode of the plan done. Returns 0 or -1 after
 * saying why. */
int eval_worker_episodes(eval_plan_t *plan);

/* ---- time ------------------------------------------------------------- */

double eval_now(void);      /* monotonic seconds */
double eval_cpu_now(void);  /* this thread's CPU seconds */

extern const ludo__cli_cmd_t ludo__cli_cmd_eval_merge;
int eval_merge_main(int argc, char **argv);

#endif
