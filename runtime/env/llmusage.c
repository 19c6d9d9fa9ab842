/* llmusage.c - what a session's Lua spent on LLM calls (ludo.llm, ludo.h
 * ludo_session_llm_usage); the scripts' accessor is in script.c, which
 * holds the script's struct. */
#include "env/env.h"

LUDO_EXTERN int ludo_session_llm_usage(const ludo_session_t *s,
                                       ludo_llm_usage_t *out) {
  const ludo__llm_counts_t *n;
  if (s == NULL || out == NULL) return LUDO_EINVAL;
  n = &s->ps->st.llm;
  out->calls = n->calls;
  out->failures = n->failures;
  out->retries = n->retries;
  out->prompt_tokens = n->prompt_tokens;
  out->completion_tokens = n->completion_tokens;
  out->latency_ms = n->latency_ms;
  return 0;
}
