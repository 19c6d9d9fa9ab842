/* eval_progress.c - the progress of `ludo eval` on stderr: on a terminal a
 * line rewritten in place (\r) twice a second; otherwise a plain line
 * every 5 seconds; nothing with --quiet. Each says episodes done / total,
 * episodes/s, the ETA, the mean reward ("-" before any) and the errors,
 * over every finished record of the run (a resume's earlier ones too);
 * after Ctrl-C the episodes it cancelled (ECANCELED), which are not
 * errors (summary.json counts them apart too, and --resume runs them
 * again): "cancelled 16"; so are the episodes a server outage lost
 * (ECONNECT, EDISCONNECTED, ENOREPLY, ECAPACITY): "lost 5". */
#include <string.h>
#include <unistd.h>

#include "cli/eval.h"

#define TTY_EVERY_MS 500
#define PLAIN_EVERY_S 5.0

static void eta_text(char *buf, size_t n, double s) {
  if (s != s || s < 0 || s > 1e7)
    snprintf(buf, n, "?");
  else if (s >= 3600)
    snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
  else if (s >= 60)
    snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)s % 60);
  else
    snprintf(buf, n, "%.0fs", s);
}

/* Appends "  NAME N" to the line for episodes counted apart (neither
 * done nor errors), when there are any. */
static void apart(char *buf, size_t n, const char *name, long long count) {
  size_t at = strlen(buf);
  if (count > 0 && at < n)
    snprintf(buf + at, n - at, "  %s %lld", name, count);
}

/* The line, without its end. */
static void line(const eval_progress_t *p, char *buf, size_t n) {
  double el = eval_now() - p->started;
  long long ran = p->done - p->skipped;
  double rate = el > 0 ? (double)ran / el : 0;
  char eta[32], mean[32];
  eta_text(eta, sizeof eta, rate > 0 ? (double)(p->total - p->done) / rate
                                     : -1);
  if (p->reward_n > 0)
    snprintf(mean, sizeof mean, "%.4g", p->reward_sum / (double)p->reward_n);
  else
    snprintf(mean, sizeof mean, "-");
  snprintf(buf, n,
           "%lld/%lld episodes  %.1f/s  ETA %s  mean reward %s  errors %lld",
           p->done, p->total, rate, eta, mean, p->errors);
  apart(buf, n, "cancelled", p->cancelled);
  apart(buf, n, "lost", p->lost);
}

static void draw(eval_progress_t *p) {
  char buf[256];
  line(p, buf, sizeof buf);
  if (p->mode == 1) {
    fprintf(stderr, "\r%s\033[K", buf);
    p->drawn = 1;
  } else {
    fprintf(stderr, "ludo eval: %s\n", buf);
  }
  fflush(stderr);
}

static void on_tick(uv_timer_t *t) {
  eval_progress_t *p = t->data;
  double now = eval_now();
  if (p->mode == 2 && now - p->last_plain < PLAIN_EVERY_S) return;
  p->last_plain = now;
  draw(p);
}

void eval_progress_start(eval_progress_t *p, uv_loop_t *loop, int quiet,
                         long long total, long long skipped) {
  memset(p, 0, sizeof *p);
  p->mode = quiet ? 0 : isatty(STDERR_FILENO) ? 1 : 2;
  p->started = p->last_plain = eval_now();
  p->total = total;
  p->done = p->skipped = skipped;
  if (p->mode == 0) return;
  uv_timer_init(loop, &p->timer);
  p->timer.data = p;
  uv_timer_start(&p->timer, on_tick, TTY_EVERY_MS, TTY_EVERY_MS);
  uv_unref((uv_handle_t *)&p->timer);
}

void eval_progress_prior(eval_progress_t *p, const eval_plan_t *plan) {
  size_t i;
  for (i = 0; i < plan->n; i++) {
    const eval_ep_t *e = &plan->eps[i];
    if (!e->done) continue;
    if (e->error) {
      p->errors++;
    } else {
      p->reward_sum += e->reward;
      p->reward_n++;
    }
  }
}

void eval_progress_episode(eval_progress_t *p, double reward, int error,
                           int cancelled, int lost) {
  if (cancelled || lost) {
    if (cancelled) p->cancelled++;
    else p->lost++;
    return;
  }
  p->done++;
  if (error) {
    p->errors++;
  } else {
    p->reward_sum += reward;
    p->reward_n++;
  }
}

void eval_progress_stop(eval_progress_t *p) {
  if (p->mode == 0) return;
  uv_timer_stop(&p->timer);
  uv_close((uv_handle_t *)&p->timer, NULL);
  draw(p);
  if (p->mode == 1) fputc('\n', stderr);
  p->mode = 0;
}
