/* llmusage.c - what a session's or a script's Lua spent on LLM calls
 * (ludo.llm; ludo.h ludo_session_llm_usage, ludo_script_llm_usage): the
 * counters of its state, in the public struct. */
#include "env/env.h"

static void copy_counts(const ludo__llm_counts_t *n, ludo_llm_usage_t *out) {
  out->calls = n->calls;
  out->failures = n->failures;
  out->retries = n->retries;
  out->prompt_tokens = n->prompt_tokens;
  out->completion_tokens = n->completion_tokens;
  out->latency_ms = n->latency_ms;
}

void ludo__session_llm_usage(const ludo_session_t *s, ludo_llm_usage_t *out) {
  copy_counts(&s->ps->st.llm, out);
}

void ludo__script_llm_usage(const ludo_script_t *sc, ludo_llm_usage_t *out) {
  copy_counts(&ludo__script_state(sc)->llm, out);
}
