/* result.c - a call's result JSON, written from the finished call thread:
 * the OpenEnv envelope {"observation", "reward", "done", "metadata"} with
 * the rubric scores under metadata.rubrics, or the state (a tool's result)
 * as is, or the text a tasks call made. */
#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "env/env.h"
#include "script/json.h"
#include "script/lstep.h"
#include "script/schema.h"

static const char *const envelope_skip[] = {"reward", "done", "metadata",
                                            NULL};

/* encode_result's upvalues: the keys it reads, made once per state so the
 * hot path does not hash C strings; the null sentinel; and the state's
 * rubric list, bound once its runner is loaded
 * (ludo__result_bind_rubrics): the rubrics' keys (a rubric_keys_t
 * userdata), their objects and the runner's pairs (nil before, or with no
 * rubric). */
enum { UV_REWARD = 1, UV_DONE, UV_METADATA, UV_LAST_SCORE, UV_STAMP,
       UV_RB_STAMP, UV_NULL, UV_KEYS, UV_OBJS, UV_PAIRS };

/* The rubrics' keys, the ready JSON text ',"name":' of each, in tree
 * order: C pointers into the strings of the keys table that is this
 * userdata's user value (which keeps them alive; the rubric tree is fixed
 * once the runner is loaded), so a step reads no Lua table for them. */
typedef struct {
  lua_Integer n;
  struct {
    const char *s;
    size_t len;
  } key[];
} rubric_keys_t;

/* Appends the literal string s. */
#define ADD_LIT(b, s) ludo__buf_add((b), (s), sizeof(s) - 1)
static const char *const rubrics_skip[] = {"rubrics", NULL};

/* The result did not fit: the session's memory cap (the buffer lives in
 * its state's memory) or the process's. [-0, +0, v] */
static int result_nomem(lua_State *L, ludo_session_t *s) {
  return ludo__error_raise(L, LUDO_ENOMEM, "the result does not fit in the "
                           "session's memory limit of %I bytes",
                           (lua_Integer)s->ps->st.cap);
}

/* 1 when the value at idx is ludo.null (an upvalue of encode_result).
 * [-0, +0, -] */
static int is_null(lua_State *L, int idx) {
  return lua_rawequal(L, idx, lua_upvalueindex(UV_NULL));
}

/* Writes the value at idx when it can be a reward or a score, as
 * ludo__json_encode would: a finite number, or nil or ludo.null (no
 * score: null). Returns 1, or 0 with nothing written for any other value.
 * NaN and the infinities are refused: JSON has neither, and writing them
 * as null would pass a broken score off as no score (OpenEnv's server
 * fails such a response too). Raises the encoder's ENOMEM. [-0, +0, v] */
static int add_score(lua_State *L, ludo__buf_t *b, int idx) {
  int rc;
  switch (lua_type(L, idx)) {
    case LUA_TNUMBER:
      if (lua_isinteger(L, idx)) {
        rc = ludo__json_add_integer(b, lua_tointeger(L, idx));
      } else {
        lua_Number d = lua_tonumber(L, idx);
        if (!isfinite(d)) return 0;
        rc = ludo__json_add_float(b, d);
      }
      break;
    case LUA_TNIL:
      rc = ADD_LIT(b, "null");
      break;
    default:
      if (!is_null(L, idx)) return 0;
      rc = ADD_LIT(b, "null");
  }
  if (rc != 0) ludo__json_nomem(L);
  return 1;
}

/* Raises: a score that is not a number, naming where it came from.
 * [-0, +0, v] */
static int bad_score(lua_State *L, int idx, const char *what,
                     const char *name, size_t nlen) {
  int num;
  idx = lua_absindex(L, idx);
  num = lua_type(L, idx) == LUA_TNUMBER;
  return ludo__error_raise(L, LUDO_ESCRIPT, "%s%s%s must be a %s or "
                           "nil, got %s", what, name ? " " : "",
                           name ? lua_pushlstring(L, name, nlen) : "",
                           num ? "finite number" : "number",
                           !num ? luaL_typename(L, idx)
                           : lua_tonumber(L, idx) != lua_tonumber(L, idx)
                               ? "nan" : lua_tostring(L, idx));
}

/* 1 when the rubric keyed `key` (',"name":') lies below the one keyed
 * `up`: its name starts with up's name and a dot. */
static int is_below(const char *key, size_t len, const char *up,
                    size_t uplen) {
  return len > uplen && memcmp(key + 2, up + 2, uplen - 4) == 0 &&
         key[uplen - 2] == '.';
}

/* The step's stamp (ludo.rubric "Step stamps"): the `stamp` of the
 * runner's pairs; -1 when there is none (then every rubric counts as
 * called). [-0, +0, -] */
static lua_Integer step_stamp(lua_State *L) {
  lua_Integer v = -1;
  if (lua_type(L, lua_upvalueindex(UV_PAIRS)) == LUA_TTABLE) {
    lua_pushvalue(L, lua_upvalueindex(UV_STAMP));
    if (lua_rawget(L, lua_upvalueindex(UV_PAIRS)) == LUA_TNUMBER)
      v = lua_tointeger(L, -1);
    lua_pop(L, 1);
  }
  return v;
}

/* 1 when the rubric at the top was called in the step stamped `step`. A
 * stamp is an integer, so comparing integers is comparing stamps.
 * [-0, +0, -] */
static int called(lua_State *L, lua_Integer step) {
  int r;
  if (step < 0) return 1;
  lua_pushvalue(L, lua_upvalueindex(UV_RB_STAMP));
  r = lua_rawget(L, -2) == LUA_TNUMBER && lua_tointeger(L, -1) == step;
  lua_pop(L, 1);
  return r;
}

/* Writes "rubrics":{"total":S,"name":s,...} from the root score at index
 * `score` and the state's rubric list (the upvalues UV_KEYS and UV_OBJS:
 * keys[i] is the ready JSON text ',"name":', objs[i] the rubric; the
 * runner's pairs (UV_PAIRS) hold the step's stamp). A rubric this step
 * did not call (its stamp is another step's) is null, whatever
 * last_score an earlier step left. A score that is no number (NaN) fails
 * the call, naming the rubric it came from: a bad score reaches the
 * parents that add it up, so the one named is the first bad rubric in
 * tree order none of whose descendants is bad, and the root only when no
 * rubric below it is. [-0, +0, e] */
static void encode_rubrics(lua_State *L, ludo_session_t *s, int score) {
  ludo__buf_t *b = &s->out;
  const rubric_keys_t *keys = lua_touserdata(L, lua_upvalueindex(UV_KEYS));
  lua_Integer i, n = keys != NULL ? keys->n : 0, bad = 0;
  const char *bad_key = NULL;
  size_t bad_len = 0;
  int root_ok, settled = 0, top = lua_gettop(L);
  lua_Integer step;
  if (ADD_LIT(b, "\"rubrics\":{\"total\":"))
    result_nomem(L, s);
  root_ok = add_score(L, b, score);
  step = n > 0 ? step_stamp(L) : -1;
  for (i = 1; i <= n; i++) {
    const char *key = keys->key[i - 1].s; /* held by the keys table */
    size_t len = keys->key[i - 1].len;
    if (ludo__buf_add(b, key, len))
      result_nomem(L, s);
    if (lua_rawgeti(L, lua_upvalueindex(UV_OBJS), i) == LUA_TTABLE &&
        called(L, step)) {
      lua_pushvalue(L, lua_upvalueindex(UV_LAST_SCORE));
      lua_rawget(L, -2);
      if (!add_score(L, b, -1) && !settled) {
        if (bad != 0 && !is_below(key, len, bad_key, bad_len))
          settled = 1; /* the first bad one has no bad descendant */
        else
          bad = i, bad_key = key, bad_len = len;
      }
    } else if (ADD_LIT(b, "null")) {
      result_nomem(L, s);
    }
    lua_settop(L, top); /* the rubric (or nil) and its score */
  }
  if (bad != 0) {
    lua_rawgeti(L, lua_upvalueindex(UV_OBJS), bad);
    lua_pushvalue(L, lua_upvalueindex(UV_LAST_SCORE));
    lua_rawget(L, -2);
    bad_score(L, -1, "the score of rubric", bad_key + 2, bad_len - 4);
  }
  if (!root_ok) bad_score(L, score, "the rubric's score", NULL, 0);
  if (ludo__buf_addc(b, '}'))
    result_nomem(L, s);
}

/* Strict sessions: raises ESCHEMA, naming the environment, the call and
 * the offending field, when the observation at index 1 (without its
 * envelope fields) does not match the declared schema. [-0, +0, e] */
static void check_observation(lua_State *L, ludo_session_t *s) {
  ludo__buf_t msg;
  char text[512];
  void *ud;
  lua_Alloc fn = lua_getallocf(L, &ud);
  int ok;
  ludo__buf_init(&msg, fn, ud);
  ok = ludo__schema_check_except(L, 1, s->env->obs_schema, "observation",
                                 envelope_skip, &msg);
  if (ok != 0) {
    ludo__buf_free(&msg);
    if (ok < 0) ludo__schema_stop(L);
    return;
  }
  /* Copied out and freed before raising. */
  snprintf(text, sizeof text, "%s",
           msg.p ? msg.p : "observation: does not match the schema");
  ludo__buf_free(&msg);
  ludo__error_raise(L, LUDO_ESCHEMA, "environment %s: the observation of "
                    "%s does not match %s: %s",
                    s->env->label ? s->env->label : s->env->name,
                    s->kind == LUDO__CALL_RESET ? "reset" : "step",
                    s->env->obs_declared ? "its declared schema"
                                         : "what every observation must be "
                                           "(an object; the environment "
                                           "declares no schema)",
                    text);
}

/* OpenEnv's wire form since 2026-06 (OPENENV.md 1.3): the observation
 * carries the metadata too. Copies the top-level metadata's text (from
 * md_at to the end of b; "{}" when md_at is (size_t)-1, there being none)
 * into the observation object that ends at obs_end. Returns 0, or -1 when
 * b cannot grow. [-0, +0, m] */
static int nest_metadata(lua_State *L, ludo__buf_t *b, size_t obs_end,
                         size_t md_at) {
  size_t mlen, add, at = obs_end - 1; /* the observation's '}' */
  int empty = b->p[at - 1] == '{';
  const char *m;
  if (md_at == (size_t)-1) {
    m = "{}";
    mlen = 2;
  } else {
    m = lua_pushlstring(L, b->p + md_at, b->len - md_at); /* b may move */
    mlen = b->len - md_at;
  }
  add = (empty ? 0 : 1) + 11 + mlen; /* [,]"metadata":M */
  if (ludo__buf_reserve(b, add)) return -1;
  memmove(b->p + at + add, b->p + at, b->len - at + 1);
  if (!empty) b->p[at++] = ',';
  memcpy(b->p + at, "\"metadata\":", 11);
  memcpy(b->p + at + 11, m, mlen);
  b->len += add;
  if (md_at != (size_t)-1) lua_pop(L, 1);
  return 0;
}

/* On the finished call thread (protected): writes the result JSON.
 * Stack: 1 = result (observation, state, a tool's result, or the JSON
 * text of a tasks call), 2 = the rubric's score (step
 * with a rubric), nil, or the tool mark for a tool's observation
 * (list_tools, call_tool: neither scored nor checked against the
 * environment's observation schema; script/lstep.h), 3 = the session as
 * light userdata. [-0, +0, e] */
static int encode_result(lua_State *L) {
  ludo_session_t *s = lua_touserdata(L, 3);
  ludo__buf_t *b = &s->out;
  int t2 = lua_type(L, 2), mt;
  int tool_obs = ludo__lstep_is_tool_mark(L, 2);
  int has_score = t2 != LUA_TNIL && t2 != LUA_TNONE && !tool_obs, md, done;
  size_t obs_at, obs_end, md_at = (size_t)-1; /* where the observation's
                                                  and metadata's text are */
  if (s->kind == LUDO__CALL_STATE || s->kind == LUDO__CALL_TOOL) {
    ludo__json_encode(L, 1, b, LUDO__JSON_MAXDEPTH, NULL);
    return 0;
  }
  if (s->kind == LUDO__CALL_TASKS) { /* ludo.tasks_api encoded it */
    size_t n;
    const char *text = lua_tolstring(L, 1, &n);
    if (text == NULL || lua_type(L, 1) != LUA_TSTRING)
      return ludo__error_raise(L, LUDO_ESCRIPT, "the tasks call returned "
                               "no JSON text");
    if (ludo__buf_add(b, text, n)) goto nomem;
    return 0;
  }
  if (lua_type(L, 1) != LUA_TTABLE)
    return ludo__error_raise(L, LUDO_ESCRIPT,
                             "the call returned no observation");
  if (s->strict && s->env->obs_schema != NULL && !tool_obs)
    check_observation(L, s);
  if (ADD_LIT(b, "{\"observation\":")) goto nomem;
  obs_at = b->len;
  ludo__json_encode(L, 1, b, LUDO__JSON_MAXDEPTH, envelope_skip);
  if (b->p[obs_at] != '{') /* a sequence, or ludo.json.array{} */
    return ludo__error_raise(L, LUDO_ESCRIPT, "the observation of %s must "
                             "be an object (a table with string keys), got "
                             "an array", s->kind == LUDO__CALL_RESET ? "reset"
                                                                 : "step");
  obs_end = b->len;
  if (ADD_LIT(b, ",\"reward\":")) goto nomem;
  lua_pushvalue(L, lua_upvalueindex(UV_REWARD));
  if (lua_rawget(L, 1) == LUA_TNIL && has_score) { /* the step set none */
    /* A bad score is raised by encode_rubrics below (always called with
     * a score), which names the rubric it came from. */
    add_score(L, b, 2);
  } else if (!add_score(L, b, -1)) {
    bad_score(L, -1, "observation.reward", NULL, 0);
  }
  lua_pushvalue(L, lua_upvalueindex(UV_DONE));
  mt = lua_rawget(L, 1);
  if (mt != LUA_TNIL && mt != LUA_TBOOLEAN)
    return ludo__error_raise(L, LUDO_ESCRIPT, "observation.done must be a "
                             "boolean or nil, got %s", luaL_typename(L, -1));
  done = mt == LUA_TBOOLEAN && lua_toboolean(L, -1);
  if (done ? ADD_LIT(b, ",\"done\":true") : ADD_LIT(b, ",\"done\":false"))
    goto nomem;
  lua_pushvalue(L, lua_upvalueindex(UV_METADATA));
  mt = lua_rawget(L, 1);
  md = lua_gettop(L);
  if (mt != LUA_TNIL && mt != LUA_TTABLE && !is_null(L, md))
    return ludo__error_raise(L, LUDO_ESCRIPT, "observation.metadata must "
                             "be a table (an object) or nil, got %s",
                             luaL_typename(L, md));
  if (mt == LUA_TTABLE && !is_null(L, md)) {
    size_t mark = b->len, n;
    if (ADD_LIT(b, ",\"metadata\":{")) goto nomem;
    n = ludo__json_encode_fields(L, md, b, LUDO__JSON_MAXDEPTH,
                                 has_score ? rubrics_skip : NULL,
                                 "metadata");
    if (has_score) {
      if (n > 0 && ludo__buf_addc(b, ',')) goto nomem;
      encode_rubrics(L, s, 2);
    } else if (n == 0) {
      b->len = mark; /* an empty metadata object is left out */
      b->p[mark] = '\0';
      goto close;
    }
    if (ludo__buf_addc(b, '}')) goto nomem;
    md_at = mark + 12;
  } else if (has_score) {
    size_t mark = b->len;
    if (ADD_LIT(b, ",\"metadata\":{")) goto nomem;
    encode_rubrics(L, s, 2);
    if (ludo__buf_addc(b, '}')) goto nomem;
    md_at = mark + 12;
  }
close:
  if (s->nest_metadata && nest_metadata(L, b, obs_end, md_at)) goto nomem;
  if (ludo__buf_addc(b, '}')) goto nomem;
  return 0;
nomem:
  return result_nomem(L, s);
}

void ludo__result_push_encoder(lua_State *L) {
  lua_pushliteral(L, "reward");
  lua_pushliteral(L, "done");
  lua_pushliteral(L, "metadata");
  lua_pushliteral(L, "last_score");
  lua_pushliteral(L, "stamp");
  lua_pushliteral(L, "_rb_stamp");
  ludo__json_pushnull(L);
  lua_pushnil(L); /* the rubric list: ludo__result_bind_rubrics */
  lua_pushnil(L);
  lua_pushnil(L);
  lua_pushcclosure(L, encode_result, UV_PAIRS);
}

void ludo__result_bind_rubrics(lua_State *L, int encoder, int named) {
  lua_Integer i, n;
  rubric_keys_t *keys;
  encoder = lua_absindex(L, encoder);
  named = lua_absindex(L, named);
  if (lua_type(L, named) != LUA_TTABLE) return;
  lua_rawgeti(L, named, 1);                          /* keys */
  if (lua_type(L, -1) != LUA_TTABLE) {
    lua_pop(L, 1);
    return;
  }
  n = (lua_Integer)lua_rawlen(L, -1);
  keys = lua_newuserdatauv(L, sizeof *keys + (size_t)n * sizeof keys->key[0],
                           1);                       /* keys, ud */
  keys->n = n;
  for (i = 1; i <= n; i++) {
    lua_rawgeti(L, -2, i);
    keys->key[i - 1].s = lua_tolstring(L, -1, &keys->key[i - 1].len);
    if (keys->key[i - 1].s == NULL) /* prepare_named made them all */
      luaL_error(L, "rubric key %d is no string", (int)i);
    lua_pop(L, 1);
  }
  lua_insert(L, -2);                                 /* ud, keys */
  lua_setiuservalue(L, -2, 1);                       /* ud */
  lua_setupvalue(L, encoder, UV_KEYS);
  lua_rawgeti(L, named, 2);                          /* objs */
  lua_setupvalue(L, encoder, UV_OBJS);
  lua_rawgeti(L, named, 3);                          /* pairs */
  lua_setupvalue(L, encoder, UV_PAIRS);
}
