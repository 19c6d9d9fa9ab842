/* llmwire.h - the two wire formats of LLM chat calls: OpenAI-compatible
 * chat completions (POST {base}/chat/completions) and Anthropic Messages
 * (POST {base}/messages). Builds request bodies and reads replies and
 * error bodies; no I/O (net/llm.c sends them). */
#ifndef LUDO_NET_LLMWIRE_H
#define LUDO_NET_LLMWIRE_H

#include <stddef.h>
#include <stdint.h>

enum { LUDO__LLM_OPENAI = 0, LUDO__LLM_ANTHROPIC = 1 };

/* Anthropic requires max_tokens: this when none is given. */
#define LUDO__LLM_ANTHROPIC_MAX_TOKENS 1024

/* One chat message (borrowed strings). */
typedef struct ludo__llm_msg_s {
  const char *role, *content;
  size_t content_len;
} ludo__llm_msg_t;

/* Sampling parameters of one call (borrowed strings). */
typedef struct ludo__llm_params_s {
  int has_temperature;
  double temperature;
  long max_tokens;              /* 0: none (Anthropic: the default) */
  const char *const *stop;      /* nstop strings */
  size_t nstop;
} ludo__llm_params_t;

/* What a successful reply says. text and finish are malloc'd (free()). */
typedef struct ludo__llm_reply_s {
  char *text;
  size_t text_len;
  char *finish;                 /* finish_reason / stop_reason; NULL */
  uint64_t prompt_tokens, completion_tokens;
} ludo__llm_reply_t;

/* The request body for `api` as compact JSON, malloc'd (free()), its
 * length in *len. Returns NULL when out of memory or when a string is not
 * valid UTF-8 (then `err` says which). */
char *ludo__llm_body(int api, const char *model, const ludo__llm_params_t *p,
                     const ludo__llm_msg_t *msgs, size_t n, size_t *len,
                     char *err, size_t errlen);

/* Reads a 2xx reply's body into *r. Returns 0, or -1 with `err` saying
 * what was wrong ("reply is not JSON: ...", "reply has no choices[0]
 * .message.content"). */
int ludo__llm_parse(int api, const char *body, size_t len,
                    ludo__llm_reply_t *r, char *err, size_t errlen);

/* Frees what ludo__llm_parse put in r. */
void ludo__llm_reply_free(ludo__llm_reply_t *r);

/* The server's message in an error body, as both APIs send it
 * ({"error": {"message": ...}}, {"error": "..."}, {"message": ...}),
 * else the body's start; control characters become spaces, at most
 * `outlen` - 1 bytes. */
void ludo__llm_error_message(const char *body, size_t len, char *out,
                             size_t outlen);

#endif
