/* llmgroup.h - the concurrency groups of LLM calls (net/llm.h): one per
 * (api, base URL, model) in a runtime, kept with the runtime's multi
 * handle. A group runs at most `limit` calls at once and starts the
 * others in the order they came (FIFO). */
#ifndef LUDO_NET_LLMGROUP_H
#define LUDO_NET_LLMGROUP_H

#include <stddef.h>

#include "net/curlm.h"

typedef struct ludo__llm_group_s ludo__llm_group_t;
typedef struct ludo__llm_waiter_s ludo__llm_waiter_t;

/* A call's place in its group; embedded in the call. `start` runs when
 * the call gets a slot (from ludo__llm_group_enter or from another
 * call's exit); it must not enter or exit the group itself. */
struct ludo__llm_waiter_s {
  ludo__llm_waiter_t *next, *prev;
  void (*start)(ludo__llm_waiter_t *w);
  int queued, running;
};

/* The group of `key` (`len` bytes) on `m`, made when none exists; its
 * limit becomes the smaller of its limit and `limit`. Returns NULL when
 * out of memory. */
ludo__llm_group_t *ludo__llm_group_join(ludo__curlm_t *m, const char *key,
                                        size_t len, unsigned limit);

/* Drops a hold taken by join; the last frees the group (no call may be
 * left in it). */
void ludo__llm_group_leave(ludo__llm_group_t *g);

/* Queues `w`, then starts what the limit allows. */
void ludo__llm_group_enter(ludo__llm_group_t *g, ludo__llm_waiter_t *w);

/* Takes `w` out (running or queued), then starts what the limit allows. */
void ludo__llm_group_exit(ludo__llm_group_t *g, ludo__llm_waiter_t *w);

#endif
