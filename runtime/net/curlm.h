/* curlm.h - libcurl's multi interface on a core's libuv loop: one
 * ludo__curlm_t per core (made on first use, closed with the core by a
 * closer) running transfers on lanes of CURLM handles (at most 64
 * transfers each, see curlm.c), their sockets watched by uv_poll handles
 * (CURLMOPT_SOCKETFUNCTION) and timeouts by a uv_timer per lane
 * (CURLMOPT_TIMERFUNCTION), driven with curl_multi_socket_action. No
 * thread, nothing blocks the loop.
 *
 * A transfer is an easy handle the caller set up; ludo__curlm_add runs it
 * and calls `done` once from the loop when it ends (the easy handle is
 * out of the multi handle by then; the caller frees it). A transfer given
 * up before it ended is taken out with ludo__curlm_remove: `done` never
 * runs. When the core closes, transfers still running end with
 * CURLE_ABORTED_BY_CALLBACK. */
#ifndef LUDO_NET_CURLM_H
#define LUDO_NET_CURLM_H

#include <curl/curl.h>

#include "core/core.h"

typedef struct ludo__curlm_s ludo__curlm_t;

/* Called once when a transfer ends, with curl's result code. */
typedef void (*ludo__curlm_done_fn)(CURL *easy, CURLcode rc, void *ud);

/* One running transfer; embedded in its owner, which keeps it alive until
 * `done` ran or ludo__curlm_remove returned. */
typedef struct ludo__curlm_xfer_s {
  CURL *easy;
  ludo__curlm_done_fn done;
  void *ud;
  struct ludo__curlm_lane_s *lane; /* the multi handle it runs on */
  struct ludo__curlm_xfer_s *next, *prev;
} ludo__curlm_xfer_t;

/* Calls curl_global_init once per process (thread-safe). Returns 0 or
 * LUDO_ENOMEM. */
int ludo__curl_global(void);

/* The multi handle of `core`, made on first use. Returns 0, LUDO_ENOMEM,
 * or LUDO_ECLOSED when the core is closing. */
int ludo__curlm_get(ludo__core_t *core, ludo__curlm_t **out);

/* Runs the transfer `x` (x->easy set up by the caller; CURLOPT_PRIVATE
 * and the socket callbacks are ludo's) on the lowest lane with room.
 * Returns 0 or LUDO_ENOMEM (then `done` never runs). */
int ludo__curlm_add(ludo__curlm_t *m, ludo__curlm_xfer_t *x,
                    ludo__curlm_done_fn done, void *ud);

/* Takes out a transfer that has not ended; `done` will not run. */
void ludo__curlm_remove(ludo__curlm_t *m, ludo__curlm_xfer_t *x);

/* Easy handles are kept for reuse (curl_easy_reset) per multi handle: as
 * many as the most transfers that ran at once. */
/* An easy handle: a reused one (options reset) or a new one; NULL when
 * out of memory. Give it back with ludo__curlm_easy_release, once out of
 * the multi handle. */
CURL *ludo__curlm_easy(ludo__curlm_t *m);
void ludo__curlm_easy_release(ludo__curlm_t *m, CURL *easy);

/* Other state that lives as long as the multi handle (net/llm.c keeps its
 * runtime-wide concurrency groups here). */
void **ludo__curlm_slot(ludo__curlm_t *m);

/* The core the multi handle runs on. */
ludo__core_t *ludo__curlm_core(ludo__curlm_t *m);

#endif
