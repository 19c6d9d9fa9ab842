/* reclaim.c - idle HTTP sessions give way at capacity (docs/protocol.md,
 * "Sessions and capacity"). OpenEnv builds a fresh environment for each
 * HTTP call and counts none of them; ludo keeps the session of a
 * POST /reset for the calls that name it, and counts it. So that such
 * sessions never lock others out (OpenEnv's own tests reset over HTTP,
 * then connect a WebSocket to a server of one session), a newcomer that
 * finds the server full takes the slot of the least recently used HTTP
 * session that is idle and has no WebSocket attached, which closes.
 * MCP sessions (openenv/session/create) are not taken: their clients
 * close them, and expect them until then.
 *
 * Each server lists its own such sessions, least recently used first.
 * The count of slots across workers stays exact without a lock:
 * spare[w] (shared, atomic) is how many of worker w's listed sessions
 * may still give way. Only w adds to it, as it lists a session; anyone
 * takes one off, never below zero. A newcomer that takes one of worker
 * w's owns that slot at once (the session count is unchanged: it moves
 * from one session to the other) and worker w owes a session: listed
 * minus spare is what it owes, and it closes that many of its least
 * recently used when its loop gets the message (SV_FWD_EVICT), without
 * giving the slots back. When worker w itself takes a listed session
 * off (for a call or an attachment, or as it closes), it takes one of
 * its spares; when none is left, every listed session is owed: that one
 * pays, closed to make room (or, closing anyway, leaving the count as it
 * is). So a slot is counted once, a session with a call in flight or a
 * WebSocket is never listed, and nothing waits: until worker w pays, the
 * process holds one session more than the count says, for the time its
 * loop takes to get a message.
 *
 * Which worker gives way: the one whose least recently used listed
 * session became idle first (oldest[w], shared, atomic, published by w
 * as its list's head changes), its own or another's. So the session
 * closed is the least recently used of the process, not of the worker
 * that needs the slot (which may list only the session it has just
 * made, not yet stepped). The choice is as exact as the published times
 * are fresh: a worker that owes sessions still shows the time of its
 * head until its loop pays, so a newcomer in that window may take the
 * next of its sessions instead of an older one elsewhere. */
#include "serve/internal.h"

#include <stdio.h>
#include <string.h>

/* This server's index in the spare counts (a lone server is worker 0,
 * whatever its options say). */
static unsigned self(const ludo__serve_t *sv) {
  return sv->group ? sv->worker : 0;
}

/* Takes one of worker w's spares: 1, or 0 when it has none. */
static int take_spare(ludo__serve_t *sv, unsigned w) {
  atomic_uint *a = &sv->shared->spare[w];
  unsigned n = atomic_load(a);
  while (n > 0)
    if (atomic_compare_exchange_weak(a, &n, n - 1)) return 1;
  return 0;
}

/* Publishes when this server's least recently used listed session
 * became idle, for the other workers' choice (sv_reclaim_slot). */
static void publish(ludo__serve_t *sv) {
  atomic_store(&sv->shared->oldest[self(sv)],
               sv->lru_head ? sv->lru_head->idle_us : UINT64_MAX);
}

static void unlist(sv_sess_t *x) {
  ludo__serve_t *sv = x->sv;
  int was_head = sv->lru_head == x;
  if (x->lprev) x->lprev->lnext = x->lnext;
  else sv->lru_head = x->lnext;
  if (x->lnext) x->lnext->lprev = x->lprev;
  else sv->lru_tail = x->lprev;
  x->lnext = x->lprev = NULL;
  x->listed = 0;
  sv->nlisted--;
  if (was_head) publish(sv);
}

void sv_reclaim_note(sv_sess_t *x) {
  ludo__serve_t *sv = x->sv;
  if (x->listed || x->kind != SV_SESS_HTTP || x->owner || x->s == NULL ||
      x->dead || x->opening || x->busy || x->ws != NULL || sv->closing)
    return;
  x->lnext = NULL;
  x->lprev = sv->lru_tail;
  x->idle_us = sv_now_us();
  if (sv->lru_tail) sv->lru_tail->lnext = x;
  else sv->lru_head = x;
  sv->lru_tail = x;
  x->listed = 1;
  sv->nlisted++;
  if (sv->lru_head == x) publish(sv); /* before the spare: never a spare
                                         without its time */
  atomic_fetch_add(&sv->shared->spare[self(sv)], 1);
}

/* Remembers the id of a session closed to make room, for the refusal of
 * a later request naming it. */
static void remember(ludo__serve_t *sv, const char *id) {
  snprintf(sv->evicted[sv->evicted_at % SV_EVICTED_KEEP],
           sizeof sv->evicted[0], "%s", id);
  sv->evicted_at++;
}

/* Closes listed x, whose slot a newcomer holds already. */
static void evict(sv_sess_t *x) {
  ludo__serve_t *sv = x->sv;
  unlist(x);
  x->slot_given = 1;
  remember(sv, x->id);
  atomic_fetch_add(&sv->shared->metrics.sessions_reclaimed, 1);
  sv_sess_close(x);
}

int sv_reclaim_take(sv_sess_t *x) {
  if (!x->listed) return 0;
  if (take_spare(x->sv, self(x->sv))) {
    unlist(x);
    return 0;
  }
  evict(x); /* every listed session is owed: this one pays */
  return -1;
}

void sv_reclaim_drop(sv_sess_t *x) {
  if (!x->listed) return;
  if (!take_spare(x->sv, self(x->sv))) x->slot_given = 1; /* pays */
  unlist(x);
}

void sv_reclaim_pay(ludo__serve_t *sv) {
  /* spare never exceeds the listed count: only this loop adds to it, as
   * it lists, and takes one off as it unlists (or pays, as here) */
  unsigned spare = atomic_load(&sv->shared->spare[self(sv)]);
  unsigned owed = spare < sv->nlisted ? sv->nlisted - spare : 0;
  for (; owed > 0 && sv->lru_head != NULL; owed--) evict(sv->lru_head);
}

/* Wakes worker w to pay for the slot taken from it. Out of memory, its
 * reaper pays; a worker that takes no messages has closed its sessions,
 * paying already. */
static void tell(ludo__serve_t *sv, unsigned w) {
  sv_fwd_t *m = sv_fwd_new(NULL, 0);
  if (m == NULL) return;
  m->op = SV_FWD_EVICT;
  m->from = sv->worker;
  if (sv_group_post(sv->group, w, m) != 0) sv_fwd_free(m);
}

/* Takes a spare of worker w for the caller: ours closes its least
 * recently used now, another's when its loop gets the message. */
static void take_from(ludo__serve_t *sv, unsigned w) {
  if (w == self(sv))
    sv_reclaim_pay(sv);
  else
    tell(sv, w);
}

int sv_reclaim_slot(ludo__serve_t *sv) {
  unsigned n = sv->group ? sv_group_size(sv->group) : 1, i, tries;
  /* The worker whose least recently used session has been idle longest
   * gives way, so that a session is never closed while an older idle one
   * lives on another worker: one just made by POST /reset, not yet used,
   * is the last to go. A spare taken by another meanwhile: look again. */
  for (tries = 0; tries < 16; tries++) {
    unsigned best = n;
    uint64_t t = UINT64_MAX;
    for (i = 0; i < n; i++) {
      uint64_t o;
      if (atomic_load(&sv->shared->spare[i]) == 0) continue;
      o = atomic_load(&sv->shared->oldest[i]);
      if (best == n || o < t) {
        best = i;
        t = o;
      }
    }
    if (best == n) return 0; /* none may give way */
    if (take_spare(sv, best)) {
      take_from(sv, best);
      return 1;
    }
  }
  for (i = 0; i < n; i++) { /* contended: any spare */
    unsigned w = (self(sv) + i) % n;
    if (take_spare(sv, w)) {
      take_from(sv, w);
      return 1;
    }
  }
  return 0;
}

void sv_unknown_text(ludo__serve_t *sv, const char *id, char *msg,
                     size_t n) {
  unsigned i, k = sv->evicted_at < SV_EVICTED_KEEP ? sv->evicted_at
                                                   : SV_EVICTED_KEEP;
  for (i = 0; i < k; i++) {
    if (strcmp(sv->evicted[i], id) == 0) {
      snprintf(msg, n, "Unknown session_id: %.64s (closed to make room "
               "for other sessions: the server was at capacity)", id);
      return;
    }
  }
  snprintf(msg, n, "Unknown session_id: %.64s", id);
}
