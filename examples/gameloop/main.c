/* gameloop: a game's frame loop stepping a ludo session (docs/embedding.md) */
#include <stdio.h>
#include <string.h>
#include <uv.h>
#include "ludo.h"

#define FRAME_US 2000 /* ludo's share of a 16 ms frame */
static const char action[] = "{\"message\":\"left\"}";
static int busy, calls, failed;

/* Runs from the loop (a poll or uv_run), never inside the _async call. */
static void on_done(ludo_session_t *s, int status, const char *json,
                    size_t len, void *ud) {
  (void)s, (void)ud;
  busy = 0;
  if (status != 0) failed = fprintf(stderr, "ludo: %.*s\n", (int)len, json);
  else calls++;
}

int main(int argc, char **argv) {
  uv_loop_t loop; /* the game's own loop: its timers, sockets, ... */
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_env_t *env;
  ludo_session_t *s;
  int rc;
  uv_loop_init(&loop);
  ludo_options_init(&o);
  o.loop = &loop;        /* ludo adds its handles to the game's loop */
  o.slice_us = FRAME_US; /* and its Lua yields to it after 2 ms */
  if ((rc = ludo_runtime_new(&rt, &o)) != 0)
    return fprintf(stderr, "ludo: %s\n", ludo_strerror(rc)), 1;
  if (ludo_env_load(rt, argc > 1 ? argv[1] : "examples/echo", NULL, &env) ||
      ludo_session_open(env, &s))
    failed = fprintf(stderr, "ludo: %s\n", ludo_runtime_errmsg(rt));
  for (int frame = 0; !failed && frame < 600 && calls < 101; frame++) {
    if (!busy) { /* one call at a time: a reset, then 100 steps */
      rc = calls ? ludo_session_step_async(s, action, strlen(action),
                                           on_done, NULL)
                 : ludo_session_reset_async(s, NULL, 0, on_done, NULL);
      if (rc != 0) failed = fprintf(stderr, "ludo: %s\n", ludo_strerror(rc));
      busy = rc == 0;
    }
    ludo_runtime_poll(rt, FRAME_US); /* ludo's time in this frame */
    uv_run(&loop, UV_RUN_NOWAIT);    /* the game's own events */
    /* ... simulate and render the frame ... */
  }
  ludo_runtime_free(rt); /* closes the session too */
  uv_run(&loop, UV_RUN_DEFAULT); /* ludo's handles finish closing */
  printf("%d calls\n", calls);
  return calls == 101 && uv_loop_close(&loop) == 0 ? 0 : 1;
}
