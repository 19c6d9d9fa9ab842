/* llm.h - LLM API clients on the core's loop (libcurl multi, net/curlm.h):
 * a client holds where and how to call (base URL, model, key, limits), a
 * call sends one chat request and retries it when that can help.
 *
 * Concurrency: clients of one runtime with the same (api, base URL, model)
 * share one group, and the group runs at most `max_concurrency` requests
 * at once (the smallest limit any client of the group asked for); the
 * others wait in FIFO order. A per-object limit would limit nothing where
 * every session builds its own client (ludo eval: one session per
 * episode).
 *
 * Retries: connection errors, timeouts, 429 and 5xx are retried up to
 * `retries` times, after a wait drawn uniformly from [0, min(max_backoff,
 * backoff * 2^(attempt-1))] (exponential backoff, full jitter), or after
 * the server's Retry-After (seconds or an HTTP date) when it sends one,
 * capped by max_retry_after. Other 4xx, malformed replies and replies
 * past max_response_bytes fail at once. A call holds its group slot while
 * it waits to retry.
 *
 * The API key is held in the client's memory only: sent as a header
 * (Authorization: Bearer / x-api-key), never logged nor put in a message
 * (a server message that quotes it has it replaced by "[redacted]"), and
 * wiped when the client is freed. */
#ifndef LUDO_NET_LLM_H
#define LUDO_NET_LLM_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "core/core.h"
#include "net/llmwire.h"

typedef struct ludo__llm_client_s ludo__llm_client_t;
typedef struct ludo__llm_call_s ludo__llm_call_t;

/* Defaults. */
#define LUDO__LLM_TIMEOUT_MS 60000u
#define LUDO__LLM_CONCURRENCY 16u
#define LUDO__LLM_RETRIES 3u
#define LUDO__LLM_BACKOFF_MS 500u
#define LUDO__LLM_MAX_BACKOFF_MS 30000u
#define LUDO__LLM_MAX_RETRY_AFTER_MS 60000u
#define LUDO__LLM_MAX_RESPONSE ((size_t)8 << 20)
/* The reply's header lines, trailers included (curl bounds headers to
 * 300 KB but not the trailers of a chunked reply). */
#define LUDO__LLM_MAX_HEADER_BYTES (256 * 1024)

/* How a client calls (strings borrowed: the client copies them). */
typedef struct ludo__llm_config_s {
  int api;                      /* LUDO__LLM_OPENAI / _ANTHROPIC */
  const char *base_url;         /* http(s)://host[:port]/path, no
                                   trailing "/chat/completions" */
  const char *model;
  const char *api_key;          /* NULL: no key sent */
  uint32_t timeout_ms;          /* per attempt, whole request */
  unsigned max_concurrency;     /* of the group (see above), >= 1 */
  unsigned retries;             /* attempts after the first */
  uint32_t backoff_ms, max_backoff_ms, max_retry_after_ms;
  size_t max_response_bytes;    /* a bigger reply body fails the call */
} ludo__llm_config_t;

/* Fills `c` with the defaults above (api OpenAI, no URL or model). */
void ludo__llm_config_init(ludo__llm_config_t *c);

/* What a call ended with; borrowed by the done callback. */
typedef struct ludo__llm_result_s {
  int ok;
  long status;                  /* HTTP status of the last attempt; 0 when
                                   none came */
  const char *text;             /* ok: the reply's text */
  size_t text_len;
  const char *error;            /* !ok: "ELLM: ..." */
  const char *finish;           /* finish/stop reason, or NULL */
  uint64_t prompt_tokens, completion_tokens;
  double latency_ms;            /* start to end: queueing and retries in */
  unsigned attempts;
} ludo__llm_result_t;

/* Called once when a call ends (from the loop). The call is freed after
 * it returns. */
typedef void (*ludo__llm_done_fn)(const ludo__llm_result_t *r, void *ud);

/* Makes a client on `core` (its runtime's group of identical clients
 * joined). Returns 0, LUDO_ENOMEM, LUDO_ECLOSED (core closing), or
 * LUDO_EINVAL with `err` saying what is wrong with `cfg`. */
int ludo__llm_client_new(ludo__core_t *core, const ludo__llm_config_t *cfg,
                         ludo__llm_client_t **out, char *err, size_t errlen);

/* Drops the caller's hold; the client goes when its calls have ended. */
void ludo__llm_client_free(ludo__llm_client_t *c);

/* The client's API (LUDO__LLM_*). */
int ludo__llm_client_api(const ludo__llm_client_t *c);
const char *ludo__llm_client_model(const ludo__llm_client_t *c);

/* Starts a call with request body `body` (copied): queued in FIFO order
 * while the group is at its limit. `done` runs once from the loop, never
 * before this returns. Returns 0, or LUDO_ENOMEM (done never runs). */
int ludo__llm_call_start(ludo__llm_client_t *c, const char *body, size_t len,
                         ludo__llm_done_fn done, void *ud,
                         ludo__llm_call_t **out);

/* Gives a call up: its request stops (the easy handle is removed and
 * freed), `done` never runs, the call is freed. */
void ludo__llm_call_cancel(ludo__llm_call_t *call);

/* The wait before retry `attempt` (1 for the first retry): full jitter
 * over the exponential backoff, or the server's Retry-After (seconds;
 * < 0 when none) capped by max_retry_after_ms. `rnd` is uniform in
 * [0, 1). */
uint64_t ludo__llm_retry_wait_ms(const ludo__llm_config_t *c, unsigned attempt,
                                 long retry_after_s, double rnd);

/* The seconds a Retry-After header's value asks for at time `now`:
 * delta-seconds (a number too large for a long is LONG_MAX, capped later
 * like any other), or an HTTP date (0 when past). -1 when `v` is NULL or
 * neither (a negative number, text). */
long ludo__llm_retry_after_s(const char *v, time_t now);

#endif
