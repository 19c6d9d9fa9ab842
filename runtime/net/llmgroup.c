/* llmgroup.c - concurrency groups of LLM calls (llmgroup.h). */
#include "net/llmgroup.h"

#include <string.h>

struct ludo__llm_group_s {
  ludo__llm_group_t *next, *prev;   /* the multi handle's groups */
  ludo__curlm_t *m;
  char *key;
  size_t len;
  unsigned limit, running, refs;
  int pumping;
  ludo__llm_waiter_t *head, *tail;  /* queued, oldest first */
};

static ludo__alloc_t *heap_of(ludo__curlm_t *m) {
  return &ludo__curlm_core(m)->heap;
}

static ludo__llm_group_t *find(ludo__curlm_t *m, const char *key,
                               size_t len) {
  ludo__llm_group_t *g = *ludo__curlm_slot(m);
  for (; g != NULL; g = g->next)
    if (g->len == len && memcmp(g->key, key, len) == 0) return g;
  return NULL;
}

ludo__llm_group_t *ludo__llm_group_join(ludo__curlm_t *m, const char *key,
                                        size_t len, unsigned limit) {
  ludo__llm_group_t *g = find(m, key, len);
  void **slot = ludo__curlm_slot(m);
  if (g == NULL) {
    g = ludo__calloc(heap_of(m), sizeof *g);
    if (g == NULL) return NULL;
    g->key = ludo__strndup(heap_of(m), key, len);
    if (g->key == NULL) {
      ludo__free(heap_of(m), g, sizeof *g);
      return NULL;
    }
    g->m = m;
    g->len = len;
    g->limit = limit;
    g->next = *slot;
    if (g->next) g->next->prev = g;
    *slot = g;
  }
  if (limit < g->limit) g->limit = limit;
  g->refs++;
  return g;
}

void ludo__llm_group_leave(ludo__llm_group_t *g) {
  ludo__alloc_t *heap = heap_of(g->m);
  if (--g->refs > 0) return;
  if (g->prev)
    g->prev->next = g->next;
  else
    *ludo__curlm_slot(g->m) = g->next;
  if (g->next) g->next->prev = g->prev;
  ludo__free(heap, g->key, g->len + 1);
  ludo__free(heap, g, sizeof *g);
}

static void unqueue(ludo__llm_group_t *g, ludo__llm_waiter_t *w) {
  if (w->prev)
    w->prev->next = w->next;
  else
    g->head = w->next;
  if (w->next)
    w->next->prev = w->prev;
  else
    g->tail = w->prev;
  w->next = w->prev = NULL;
  w->queued = 0;
}

/* Starts queued calls while there is room. */
static void pump(ludo__llm_group_t *g) {
  if (g->pumping) return;
  g->pumping = 1;
  while (g->head != NULL && g->running < g->limit) {
    ludo__llm_waiter_t *w = g->head;
    unqueue(g, w);
    w->running = 1;
    g->running++;
    w->start(w);
  }
  g->pumping = 0;
}

void ludo__llm_group_enter(ludo__llm_group_t *g, ludo__llm_waiter_t *w) {
  w->next = NULL;
  w->prev = g->tail;
  if (g->tail)
    g->tail->next = w;
  else
    g->head = w;
  g->tail = w;
  w->queued = 1;
  w->running = 0;
  pump(g);
}

void ludo__llm_group_exit(ludo__llm_group_t *g, ludo__llm_waiter_t *w) {
  if (w->queued) unqueue(g, w);
  if (w->running) {
    w->running = 0;
    g->running--;
  }
  pump(g);
}
