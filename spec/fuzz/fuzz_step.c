/* fuzz_step.c - a full action path through the public API: any bytes as
 * the action of an echo session (examples/echo). The step either works or
 * fails with a ludo error code and a message; the session keeps working;
 * nothing crashes. Run from the repository root. */
#include <stdlib.h>
#include <string.h>

#include "ludo.h"

static ludo_runtime_t *rt;
static ludo_session_t *s;

static void setup(void) {
  ludo_env_t *env;
  ludo_options_t o;
  const char *out;
  size_t len;
  ludo_options_init(&o);
  o.memory_cap = (size_t)16 << 20;
  o.cpu_budget_ms = 1000;
  if (ludo_runtime_new(&rt, &o) != 0 ||
      ludo_env_load(rt, "examples/echo", NULL, &env) != 0 ||
      ludo_session_open(env, &s) != 0 ||
      ludo_session_reset(s, NULL, 0, &out, &len) != 0)
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *out;
  size_t len;
  int rc;
  if (rt == NULL) setup();
  rc = ludo_session_step(s, (const char *)data, size, &out, &len);
  if (rc > 0) abort();
  if (rc != 0 && strlen(ludo_session_errmsg(s)) == 0) abort();
  if (ludo_session_step(s, "{\"message\":\"ok\"}", 16, &out, &len) != 0)
    abort(); /* the session must stay usable */
  return 0;
}
