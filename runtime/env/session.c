/* session.c - sessions: open/close, calls and their JSON results. */
#include "env/env.h"

#include <lauxlib.h>
#include <string.h>

#include "script/json.h"

static const char *const envelope_skip[] = {"reward", "done", "metadata",
                                            NULL};

/* encode_result's upvalues: the keys it reads, made once per state so the
 * hot path does not hash C strings. */
enum { UV_REWARD = 1, UV_DONE, UV_METADATA, UV_LAST_SCORE };
static const char *const rubrics_skip[] = {"rubrics", NULL};

/* Writes "rubrics":{"total":S,"name":s,...} from the root score at index
 * `score` and the state's rubric list: ps->named_ref holds {keys, objs}
 * where keys[i] is the ready JSON text ',"name":' and objs[i] the rubric.
 * [-0, +0, e] */
static void encode_rubrics(lua_State *L, ludo_session_t *s, int score) {
  ludo__buf_t *b = &s->out;
  lua_Integer i, n;
  if (ludo__buf_adds(b, "\"rubrics\":{\"total\":"))
    luaL_error(L, "ENOMEM: the result buffer cannot grow");
  ludo__json_encode(L, score, b, LUDO__JSON_MAXDEPTH, NULL);
  lua_rawgeti(L, LUA_REGISTRYINDEX, s->ps->named_ref); /* {keys, objs} */
  if (lua_type(L, -1) == LUA_TTABLE) {
    lua_rawgeti(L, -1, 1);                              /* keys */
    lua_rawgeti(L, -2, 2);                              /* keys, objs */
    n = (lua_Integer)lua_rawlen(L, -2);
    for (i = 1; i <= n; i++) {
      size_t len;
      const char *key;
      lua_rawgeti(L, -2, i);
      key = lua_tolstring(L, -1, &len);
      if (key == NULL || ludo__buf_add(b, key, len))
        luaL_error(L, "ENOMEM: the result buffer cannot grow");
      lua_pop(L, 1);
      if (lua_rawgeti(L, -1, i) == LUA_TTABLE) {
        lua_pushvalue(L, lua_upvalueindex(UV_LAST_SCORE));
        lua_rawget(L, -2);
        ludo__json_encode(L, -1, b, LUDO__JSON_MAXDEPTH, NULL);
        lua_pop(L, 1);
      } else if (ludo__buf_add(b, "null", 4)) {
        luaL_error(L, "ENOMEM: the result buffer cannot grow");
      }
      lua_pop(L, 1);
    }
    lua_pop(L, 2);
  }
  lua_pop(L, 1);
  if (ludo__buf_addc(b, '}'))
    luaL_error(L, "ENOMEM: the result buffer cannot grow");
}

/* On the finished call thread (protected): writes the result JSON.
 * Stack: 1 = result (observation or state), 2 = the rubric's score (step
 * with a rubric) or nil, 3 = the session as light userdata. [-0, +0, e] */
static int encode_result(lua_State *L) {
  ludo_session_t *s = lua_touserdata(L, 3);
  ludo__buf_t *b = &s->out;
  int has_score = !lua_isnil(L, 2), md;
  if (s->kind == LUDO__CALL_STATE) {
    ludo__json_encode(L, 1, b, LUDO__JSON_MAXDEPTH, NULL);
    return 0;
  }
  if (lua_type(L, 1) != LUA_TTABLE)
    return luaL_error(L, "ESCRIPT: the call returned no observation");
  if (ludo__buf_adds(b, "{\"observation\":")) goto nomem;
  ludo__json_encode(L, 1, b, LUDO__JSON_MAXDEPTH, envelope_skip);
  if (ludo__buf_adds(b, ",\"reward\":")) goto nomem;
  lua_pushvalue(L, lua_upvalueindex(UV_REWARD));
  if (lua_rawget(L, 1) == LUA_TNIL && has_score) /* the step set none */
    ludo__json_encode(L, 2, b, LUDO__JSON_MAXDEPTH, NULL);
  else
    ludo__json_encode(L, -1, b, LUDO__JSON_MAXDEPTH, NULL);
  lua_pushvalue(L, lua_upvalueindex(UV_DONE));
  lua_rawget(L, 1);
  if (ludo__buf_adds(b, lua_toboolean(L, -1) ? ",\"done\":true"
                                              : ",\"done\":false"))
    goto nomem;
  lua_pushvalue(L, lua_upvalueindex(UV_METADATA));
  lua_rawget(L, 1);
  md = lua_gettop(L);
  if (lua_type(L, md) == LUA_TTABLE) {
    size_t mark = b->len, n;
    if (ludo__buf_adds(b, ",\"metadata\":{")) goto nomem;
    n = ludo__json_encode_fields(L, md, b, LUDO__JSON_MAXDEPTH,
                                 has_score ? rubrics_skip : NULL);
    if (has_score) {
      if (n > 0 && ludo__buf_addc(b, ',')) goto nomem;
      encode_rubrics(L, s, 2);
    } else if (n == 0) {
      b->len = mark; /* an empty metadata object is left out */
      b->p[mark] = '\0';
      return ludo__buf_addc(b, '}') ? luaL_error(L, "ENOMEM") : 0;
    }
    if (ludo__buf_addc(b, '}')) goto nomem;
  } else if (has_score) {
    if (ludo__buf_adds(b, ",\"metadata\":{")) goto nomem;
    encode_rubrics(L, s, 2);
    if (ludo__buf_addc(b, '}')) goto nomem;
  }
  if (ludo__buf_addc(b, '}')) goto nomem;
  return 0;
nomem:
  return luaL_error(L, "ENOMEM: the result buffer cannot grow");
}

void ludo__session_push_encoder(lua_State *L) {
  lua_pushliteral(L, "reward");
  lua_pushliteral(L, "done");
  lua_pushliteral(L, "metadata");
  lua_pushliteral(L, "last_score");
  lua_pushcclosure(L, encode_result, 4);
}

static void set_err(ludo_session_t *s, const char *msg, size_t len) {
  ludo__buf_reset(&s->err);
  if (ludo__buf_add(&s->err, msg, len)) ludo__buf_reset(&s->err);
}

static void enqueue(ludo_runtime_t *rt, ludo_session_t *s) {
  s->queued = 1;
  s->ready_next = NULL;
  if (rt->ready_tail)
    rt->ready_tail->ready_next = s;
  else
    rt->ready_head = s;
  rt->ready_tail = s;
}

static void dequeue(ludo_runtime_t *rt, ludo_session_t *s) {
  ludo_session_t *prev = NULL, *cur;
  for (cur = rt->ready_head; cur; prev = cur, cur = cur->ready_next) {
    if (cur != s) continue;
    if (prev)
      prev->ready_next = cur->ready_next;
    else
      rt->ready_head = cur->ready_next;
    if (rt->ready_tail == s) rt->ready_tail = prev;
    break;
  }
  s->queued = 0;
}

static void deliver(ludo_session_t *s) {
  ludo_runtime_t *rt = s->env->rt;
  ludo_call_cb cb = s->cb;
  void *ud = s->cb_ud;
  s->cb = NULL;
  s->cb_ud = NULL;
  if (cb == NULL) return;
  rt->in_callback++;
  if (s->status == 0)
    cb(s, 0, s->out.p ? s->out.p : "", s->out.len, ud);
  else
    cb(s, s->status, s->err.p ? s->err.p : "", s->err.len, ud);
  rt->in_callback--;
}

static void on_done(ludo__sched_t *sc, int status, lua_State *co, void *ud) {
  ludo_session_t *s = ud;
  ludo_runtime_t *rt = s->env->rt;
  (void)sc;
  ludo__buf_reset(&s->out);
  if (status == 0 && s->kind != LUDO__CALL_CLOSE) {
    lua_settop(co, 2);
    lua_rawgeti(co, LUA_REGISTRYINDEX, s->ps->encode_ref);
    lua_insert(co, 1);
    lua_pushlightuserdata(co, s);
    status = lua_pcall(co, 3, 0, 0);
    if (status != 0) {
      status = ludo__state_error(&s->ps->st, co, status);
      ludo__buf_reset(&s->out);
    }
  }
  if (status != 0) {
    size_t len = 0;
    const char *msg = lua_tolstring(co, -1, &len);
    if (msg == NULL) {
      msg = "ESCRIPT: unknown error";
      len = strlen(msg);
    }
    set_err(s, msg, len);
  }
  s->status = status;
  s->done = 1;
  rt->calls--;
  if (s->cb != NULL) {
    if (s->closing)
      deliver(s);
    else
      enqueue(rt, s);
  }
}

void ludo__runtime_drain(ludo_runtime_t *rt) {
  while (rt->ready_head) {
    ludo_session_t *s = rt->ready_head;
    rt->ready_head = s->ready_next;
    if (rt->ready_head == NULL) rt->ready_tail = NULL;
    s->queued = 0;
    deliver(s);
  }
}

int ludo__session_open(ludo_env_t *env, ludo_session_t **out) {
  ludo_runtime_t *rt = env->rt;
  ludo_session_t *s;
  ludo__pstate_t *ps;
  int rc;
  *out = NULL;
  if (!env->concurrent && env->nsessions > 0) {
    ludo__runtime_seterr(rt, "EBUSY: environment %s is not concurrent and "
                             "already has an open session", env->name);
    return LUDO_EBUSY;
  }
  s = ludo__calloc(&rt->heap, sizeof *s);
  if (s == NULL) return LUDO_ENOMEM;
  if (env->pool != NULL) {
    ps = env->pool;
    env->pool = ps->next;
    env->npool--;
  } else {
    rc = ludo__env_build(env, &ps);
    if (rc != 0) {
      ludo__free(&rt->heap, s, sizeof *s);
      return rc;
    }
  }
  ps->next = NULL;
  s->env = env;
  s->ps = ps;
  if (ludo__uuid4(s->id) != 0) strcpy(s->id, "00000000-0000-4000-8000-000000000000");
  ps->st.who = s->id;
  ps->st.owner = s;
  ludo__buf_init(&s->out, ludo__alloc_fn, &rt->heap);
  ludo__buf_init(&s->err, ludo__alloc_fn, &rt->heap);
  ludo__buf_init(&s->in, ludo__alloc_fn, &rt->heap);
  s->next = rt->sessions;
  if (rt->sessions) rt->sessions->prev = s;
  rt->sessions = s;
  rt->nsessions++;
  env->nsessions++;
  ludo__env_want_refill(env);
  *out = s;
  return 0;
}

int ludo__session_call(ludo_session_t *s, int kind, const char *json,
                       size_t len, ludo_call_cb cb, void *ud,
                       const char **out, size_t *out_len) {
  ludo_runtime_t *rt = s->env->rt;
  int blocking = cb == NULL;
  int rc;
  if (s->closing) return LUDO_ECLOSED;
  if (s->ps->sched.in_call || s->queued) return LUDO_EBUSY;
  if (blocking && (rt->in_uv || rt->in_callback || s->ps->sched.resuming))
    return LUDO_EBUSY;
  if (json == NULL) len = 0;
  if (!blocking && len > 0) {
    ludo__buf_reset(&s->in);
    if (ludo__buf_add(&s->in, json, len)) return LUDO_ENOMEM;
    json = s->in.p;
  }
  s->kind = kind;
  s->done = 0;
  s->cb = cb;
  s->cb_ud = ud;
  rt->calls++;
  rc = ludo__sched_start(&s->ps->sched, s->ps->dispatch_ref, kind, json,
                         len, on_done, s);
  if (rc != 0) {
    rt->calls--;
    s->cb = NULL;
    return rc;
  }
  if (!blocking) return 0;
  while (!s->done) {
    rt->in_uv = 1;
    uv_run(&rt->loop, UV_RUN_ONCE);
    rt->in_uv = 0;
  }
  if (s->status != 0) return s->status;
  if (out) *out = s->out.p ? s->out.p : "";
  if (out_len) *out_len = s->out.len;
  return 0;
}

void ludo__session_close(ludo_session_t *s) {
  ludo_runtime_t *rt = s->env->rt;
  ludo_env_t *env = s->env;
  if (s->closing) return;
  s->closing = 1;
  /* A completion waiting in the queue is delivered now, as it was. */
  if (s->queued) {
    dequeue(rt, s);
    deliver(s);
  }
  /* A waiting call ends with ECANCELED; its callback runs now. */
  if (s->ps->sched.in_call) ludo__sched_cancel(&s->ps->sched);
  /* The module's close(), if any, runs under the budget; if it waits, it
   * is cancelled: closing is prompt. */
  s->kind = LUDO__CALL_CLOSE;
  s->cb = NULL;
  rt->calls++;
  if (ludo__sched_start(&s->ps->sched, s->ps->dispatch_ref,
                        LUDO__CALL_CLOSE, NULL, 0, on_done, s) == 0) {
    if (s->ps->sched.in_call) ludo__sched_cancel(&s->ps->sched);
  } else {
    rt->calls--;
  }
  ludo__pstate_free(rt, s->ps);
  s->ps = NULL;
  if (s->prev)
    s->prev->next = s->next;
  else
    rt->sessions = s->next;
  if (s->next) s->next->prev = s->prev;
  rt->nsessions--;
  env->nsessions--;
  ludo__buf_free(&s->out);
  ludo__buf_free(&s->err);
  ludo__buf_free(&s->in);
  ludo__free(&rt->heap, s, sizeof *s);
}
