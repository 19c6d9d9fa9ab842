/* lre.c - ludo.re: pcre2 regular expressions for Lua, in the shapes of
 * OpenResty's ngx.re (match, find, gmatch, sub, gsub) plus split, compile
 * and escape.
 *
 * How it holds together:
 *   - Every compiled pattern is owned by a "ludo.regex" userdata whose
 *     __gc frees the pcre2 code. The userdata exists before anything is
 *     allocated in C, so a Lua error at any point leaks nothing; pcre2's
 *     memory comes from the state's lua_Alloc.
 *   - Each lua_State has one context (a userdata in the registry, also the
 *     first upvalue of every function here) with the match limits and a
 *     bounded pattern cache: {[options] = {[pattern] = regex}} plus a ring
 *     of LUDO_L_RE_CACHE_MAX slots swept by a clock hand for eviction.
 *   - pcre2 writes offsets into the regex's own match data. They are
 *     copied out before any Lua API call, because a Lua call (a gsub
 *     callback, or a finalizer run by an allocation) may use the same
 *     regex again.
 *   - Runtime failures return nil, "EREGEX: message", "EREGEX"; wrong
 *     argument types raise. */
#include "script/lre.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>

#include "base/regex.h"
#include "script/state.h"

#define LUDO_L_REGEX_MT "ludo.regex"
#define LUDO_L_RE_CACHE_MAX 64

/* Default limits and the range re.limits() accepts: the defaults are the
 * ceilings too, so a session can lower its limits but never raise them. Hooks never fire
 * inside pcre2, so the match limit is the only bound on the running time
 * of one catastrophic backtracking search: 10^7 steps (pcre2's and
 * OpenResty's default) take about 20 ms with the JIT and 150 ms in the
 * interpreter. The heap limit keeps the interpreter's backtracking frames
 * well under a session's memory cap (64 MiB by default). */
#define LUDO_L_RE_MATCH_DEFAULT 10000000
#define LUDO_L_RE_MATCH_MAX LUDO_L_RE_MATCH_DEFAULT
#define LUDO_L_RE_DEPTH_DEFAULT 1000000
#define LUDO_L_RE_DEPTH_MAX LUDO_L_RE_DEPTH_DEFAULT
#define LUDO_L_RE_HEAP_DEFAULT (32 * 1024 * 1024)
#define LUDO_L_RE_HEAP_MIN 1024
#define LUDO_L_RE_HEAP_MAX LUDO_L_RE_HEAP_DEFAULT

/* Offsets copied from the ovector live on the C stack up to this many
 * groups, in a userdata box beyond. */
#define LUDO_L_RE_SMALL_GROUPS 15

/* lre_search() result when the regex was freed (reachable only through
 * a __gc called by hand). */
#define LUDO_L_RE_EFREED (-100000)

/* Registry key of the per-state context. */
static const char ludo__lre_ctx_key = 'r';

/* A compiled pattern's C side. It is allocated apart from its Lua box and
 * linked into its context, so that the context's finalizer can free it if
 * Lua could not run the box's finalizer (a __gc call itself needs memory,
 * and fails when the state is at its memory cap). */
typedef struct ludo__lre_node_s {
  ludo__regex_t re;
  struct ludo__lre_node_s *prev, *next; /* ring anchored in the context */
  lua_Alloc fn;                         /* allocator of this node */
  void *ud;
  ludo__state_t *st;                    /* the session that pays for */
  size_t jit_bytes;                     /* its JIT code (mmap'd by pcre2) */
} ludo__lre_node_t;

typedef struct ludo__lre_ctx_s {
  ludo__regex_limits_t lim;
  int used;              /* ring slots in use, up to LUDO_L_RE_CACHE_MAX */
  int hand;              /* clock hand: next ring slot (1-based) to visit */
  ludo__lre_node_t live; /* sentinel of the ring of live nodes */
} ludo__lre_ctx_t;
/* user values: 1 = cache {[opts] = {[pattern] = regex}},
 *              2 = ring {[slot] = regex} */

/* The Lua box of a regex ("ludo.regex" userdata). */
typedef struct ludo__lre_regex_s {
  ludo__lre_node_t *node; /* owned; NULL once freed */
  uint32_t opts;          /* cache key */
  unsigned char ref;      /* clock bit: used since the hand last passed */
} ludo__lre_regex_t;
/* user value 1 = the pattern string */

/* Iteration over successive matches (gmatch, gsub, split). */
typedef struct ludo__lre_iter_s {
  size_t pos;     /* next search offset */
  uint32_t flags; /* LUDO_RE_EXEC_* for the next search */
  int done;
} ludo__lre_iter_t;

/* ---------------------------------------------------------------------
 * Errors */

/* Pushes nil, "<code>: <message>", "<code>"; returns 3.
 * [-0, +3, m] */
static int lre_failv(lua_State *L, const char *code, const char *fmt,
                     va_list ap) {
  luaL_pushfail(L);
  lua_pushfstring(L, "%s: ", code);
  lua_pushvfstring(L, fmt, ap);
  lua_concat(L, 2);
  lua_pushstring(L, code);
  return 3;
}

/* [-0, +3, m] */
static int lre_fail(lua_State *L, const char *fmt, ...) {
  va_list ap;
  int n;
  va_start(ap, fmt);
  n = lre_failv(L, "EREGEX", fmt, ap);
  va_end(ap);
  return n;
}

/* [-0, +3, m] */
static int lre_nomem(lua_State *L) {
  luaL_pushfail(L);
  lua_pushliteral(L, "ENOMEM: not enough memory for the regex");
  lua_pushliteral(L, "ENOMEM");
  return 3;
}

/* Turns a ludo__regex_exec() error into the failure triple. `bad` is the
 * offset of the bad byte for a UTF error, `pos` the search start.
 * [-0, +3, m] */
static int lre_exec_fail(lua_State *L, const ludo__lre_ctx_t *ctx, int rc,
                         size_t bad, size_t pos) {
  char msg[256];
  if (ludo__regex_is_utf_error(rc))
    return lre_fail(L, "invalid UTF-8 in subject at offset %I",
                    (lua_Integer)bad);
  switch (rc) {
    case LUDO_RE_ERR_MATCHLIMIT:
      return lre_fail(L, "match limit exceeded (%I, see re.limits)",
                      (lua_Integer)ctx->lim.match);
    case LUDO_RE_ERR_DEPTHLIMIT:
      return lre_fail(L, "depth limit exceeded (%I, see re.limits)",
                      (lua_Integer)ctx->lim.depth);
    case LUDO_RE_ERR_HEAPLIMIT:
      return lre_fail(L, "heap limit exceeded (%I bytes, see re.limits)",
                      (lua_Integer)ctx->lim.heap_kib * 1024);
    case LUDO_RE_ERR_BADUTFOFFSET:
      return lre_fail(L, "start position %I is inside a UTF-8 character",
                      (lua_Integer)pos + 1);
    case LUDO_RE_ERR_NOMEMORY:
      return lre_nomem(L);
    case LUDO_RE_ERR_STOPPED: /* past the call's budget (lre_stop) */
      if (ludo__state_check(L)) return lua_error(L);
      return lre_fail(L, "search stopped");
    case LUDO_L_RE_EFREED:
      return luaL_error(L, "regex was freed");
    default:
      return lre_fail(L, "%s", ludo__regex_strerror(rc, msg, sizeof(msg)));
  }
}

/* ---------------------------------------------------------------------
 * Context, regex objects and the cache */

/* The context is upvalue 1 of every function of the module. */
#define LRE_CTX_IDX lua_upvalueindex(1)

static ludo__lre_ctx_t *lre_ctx(lua_State *L) {
  ludo__lre_ctx_t *ctx = lua_touserdata(L, LRE_CTX_IDX);
  ctx->lim.stop_ud = L; /* the thread whose search may be stopped */
  return ctx;
}

/* Checks that argument `idx` is a live regex object.
 * [-0, +0, v] */
static ludo__lre_regex_t *ludo_l_check_regex(lua_State *L, int idx) {
  ludo__lre_regex_t *rx = luaL_checkudata(L, idx, LUDO_L_REGEX_MT);
  if (rx->node == NULL) luaL_argerror(L, idx, "regex was freed");
  return rx;
}

/* Parses the optional flags argument at `idx` into *opts. On a bad flag
 * pushes the failure triple and returns 3, else returns 0.
 * [-0, +(0|3), v] */
static int lre_opts(lua_State *L, int idx, uint32_t *opts) {
  size_t n;
  const char *f = luaL_optlstring(L, idx, "", &n);
  char bad = 0;
  int rc = ludo__regex_flags(f, n, opts, &bad);
  if (rc == LUDO_RE_FLAG_CONFLICT)
    return lre_fail(L, "flags 'u' (UTF-8) and 'b' (bytes) conflict");
  if (rc != 0) {
    char show[8];
    if (bad >= 0x20 && bad < 0x7f)
      snprintf(show, sizeof(show), "%c", bad);
    else
      snprintf(show, sizeof(show), "\\x%02X", (unsigned char)bad);
    return lre_fail(L, "unknown flag '%s' (expected some of imsxuaDUb)",
                    show);
  }
  return 0;
}

/* Looks `pattern` (at `pat`) up in the cache under `opts`. On a hit pushes
 * the regex and returns it; on a miss pushes nothing and returns NULL.
 * [-0, +(0|1), -] */
static ludo__lre_regex_t *lre_cache_get(lua_State *L, int pat,
                                        uint32_t opts) {
  ludo__lre_regex_t *rx = NULL;
  lua_getiuservalue(L, LRE_CTX_IDX, 1); /* stack: cache */
  if (lua_rawgeti(L, -1, opts) == LUA_TTABLE) {
    lua_pushvalue(L, pat); /* stack: cache byopts pattern */
    if (lua_rawget(L, -2) == LUA_TUSERDATA) {
      rx = lua_touserdata(L, -1); /* stack: cache byopts regex */
      if (rx->node != NULL) {
        rx->ref = 1;
        lua_replace(L, -3); /* stack: regex byopts */
        lua_pop(L, 1);      /* stack: regex */
        return rx;
      }
      rx = NULL;
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 2);
  return NULL;
}

/* Stores the regex at `rxi` (compiled from the pattern at `pat`) in the
 * cache, evicting the first ring entry whose clock bit is clear.
 * [-0, +0, m] */
static void lre_cache_put(lua_State *L, int rxi, int pat) {
  ludo__lre_ctx_t *ctx = lre_ctx(L);
  ludo__lre_regex_t *rx = lua_touserdata(L, rxi);
  int slot;
  lua_getiuservalue(L, LRE_CTX_IDX, 1); /* stack: cache */
  lua_getiuservalue(L, LRE_CTX_IDX, 2); /* stack: cache ring */
  if (ctx->used < LUDO_L_RE_CACHE_MAX) {
    slot = ++ctx->used;
  } else {
    ludo__lre_regex_t *victim;
    for (;;) { /* ends within two turns: each pass clears a bit */
      lua_rawgeti(L, -1, ctx->hand); /* stack: cache ring victim */
      victim = lua_touserdata(L, -1);
      if (victim == NULL || !victim->ref || victim->node == NULL) break;
      victim->ref = 0;
      lua_pop(L, 1);
      ctx->hand = ctx->hand % LUDO_L_RE_CACHE_MAX + 1;
    }
    slot = ctx->hand;
    ctx->hand = ctx->hand % LUDO_L_RE_CACHE_MAX + 1;
    if (victim != NULL) {
      /* Unlink cache[opts][pattern] if it still names the victim. */
      if (lua_rawgeti(L, -3, victim->opts) == LUA_TTABLE) {
        lua_getiuservalue(L, -2, 1); /* stack: cache ring victim byopts p */
        lua_pushvalue(L, -1);
        lua_rawget(L, -3); /* stack: ... victim byopts p current */
        if (lua_rawequal(L, -1, -4)) {
          lua_pop(L, 1);
          lua_pushnil(L);
          lua_rawset(L, -3); /* stack: ... victim byopts */
        } else {
          lua_pop(L, 2);
        }
      }
      lua_pop(L, 1); /* stack: cache ring victim */
    }
    lua_pop(L, 1); /* stack: cache ring */
  }
  lua_pushvalue(L, rxi);
  lua_rawseti(L, -2, slot); /* stack: cache ring */
  if (lua_rawgeti(L, -2, rx->opts) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_createtable(L, 0, 4);
    lua_pushvalue(L, -1);
    lua_rawseti(L, -4, rx->opts);
  } /* stack: cache ring byopts */
  lua_pushvalue(L, pat);
  lua_pushvalue(L, rxi);
  lua_rawset(L, -3);
  rx->ref = 0;
  lua_pop(L, 3);
}

/* Unlinks `node` from its context's ring and frees it with everything it
 * holds. */
static void lre_node_free(ludo__lre_node_t *node) {
  if (node->st != NULL) { /* the JIT code is given back */
    node->st->used -= node->jit_bytes;
    if (node->st->total) *node->st->total -= node->jit_bytes;
  }
  node->prev->next = node->next;
  node->next->prev = node->prev;
  ludo__regex_free(&node->re);
  node->fn(node->ud, node, sizeof(*node), 0);
}

/* pcre2 allocates JIT code with mmap, outside the state's allocator: its
 * size is counted against the session's memory cap here, and refused past
 * it. Returns 0, or -1 when it does not fit. */
static int lre_count_jit(lua_State *L, ludo__lre_node_t *node) {
  ludo__state_t *st = ludo__state_of(L);
  size_t jit = ludo__regex_jit_size(&node->re);
  if (st == NULL || jit == 0) return 0;
  if (st->cap != 0 && st->used + jit > st->cap) return -1;
  st->used += jit;
  if (st->total) *st->total += jit;
  node->st = st;
  node->jit_bytes = jit;
  return 0;
}

/* Compiles the pattern at `pat` with `opts` into a new regex object. On
 * success pushes it and returns it; on failure pushes the failure triple
 * and returns NULL.
 * [-0, +(1|3), m] */
static ludo__lre_regex_t *lre_compile(lua_State *L, int pat, uint32_t opts) {
  ludo__lre_ctx_t *ctx = lre_ctx(L);
  size_t plen, size;
  const char *p = lua_tolstring(L, pat, &plen);
  ludo__lre_regex_t *rx;
  ludo__lre_node_t *node;
  char err[320];
  void *ud;
  lua_Alloc fn = lua_getallocf(L, &ud);
  int rc, tries;

  /* The box exists, with its __gc, before anything is allocated in C. */
  rx = lua_newuserdatauv(L, sizeof(*rx), 1);
  memset(rx, 0, sizeof(*rx));
  rx->opts = opts;
  luaL_setmetatable(L, LUDO_L_REGEX_MT);
  lua_pushvalue(L, pat);
  lua_setiuservalue(L, -2, 1); /* stack: regex */

  for (tries = 0; tries < 2; tries++) {
    if (tries > 0) /* pcre2 memory is invisible to the collector */
      lua_gc(L, LUA_GCCOLLECT);
    node = fn(ud, NULL, 0, sizeof(*node));
    if (node == NULL) {
      rc = LUDO_ENOMEM;
      continue;
    }
    memset(node, 0, sizeof(*node));
    node->fn = fn;
    node->ud = ud;
    node->next = ctx->live.next;
    node->prev = &ctx->live;
    node->next->prev = node;
    ctx->live.next = node;
    rc = ludo__regex_compile(&node->re, p, plen, opts, fn, ud, err,
                             sizeof(err));
    if (rc == 0) break;
    lre_node_free(node);
    if (rc != LUDO_ENOMEM) break;
  }
  if (rc != 0) {
    lua_pop(L, 1);
    if (rc == LUDO_ENOMEM) {
      lre_nomem(L);
    } else {
      lre_fail(L, "%s", err);
    }
    return NULL;
  }
  if (lre_count_jit(L, node) != 0) {
    lre_node_free(node);
    lua_pop(L, 1);
    lre_nomem(L);
    return NULL;
  }
  rx->node = node;
  /* Tell the collector about the memory pcre2 holds for this object. */
  size = ludo__regex_size(&node->re) / 1024;
  if (size > 0) lua_gc(L, LUA_GCSTEP, size > 1 << 20 ? 1 << 20 : (int)size);
  return rx;
}

/* Gets the regex for the pattern at `pat` and the flags at `fl`, from the
 * cache or compiled (and then cached). On success pushes it and returns
 * it; on a bad flag or pattern pushes the failure triple and returns NULL.
 * [-0, +(1|3), m] */
static ludo__lre_regex_t *lre_get(lua_State *L, int pat, int fl) {
  ludo__lre_regex_t *rx;
  uint32_t opts = 0;
  if (lre_opts(L, fl, &opts)) return NULL;
  rx = lre_cache_get(L, pat, opts);
  if (rx != NULL) return rx;
  rx = lre_compile(L, pat, opts);
  if (rx != NULL) lre_cache_put(L, lua_gettop(L), pat);
  return rx;
}

/* ---------------------------------------------------------------------
 * Matching */

/* Room for a copy of the ovector. */
typedef struct ludo__lre_ov_s {
  size_t small[2 * (LUDO_L_RE_SMALL_GROUPS + 1)];
  size_t *v;
} ludo__lre_ov_t;

/* Points ov->v at enough room for `rx`'s offsets: the C stack, or a
 * userdata box pushed on the Lua stack (a nil is pushed otherwise, so the
 * stack grows by one either way).
 * [-0, +1, m] */
static size_t *lre_ov(lua_State *L, ludo__lre_ov_t *ov,
                      const ludo__lre_regex_t *rx) {
  size_t n = 2 * ((size_t)rx->node->re.ngroups + 1);
  if (rx->node->re.ngroups <= LUDO_L_RE_SMALL_GROUPS) {
    lua_pushnil(L);
    ov->v = ov->small;
  } else {
    ov->v = lua_newuserdatauv(L, n * sizeof(size_t), 0);
  }
  return ov->v;
}

/* Runs one search and, on a match, copies the offsets into `ov` (pairs
 * pcre2 did not set become LUDO_RE_UNSET). Returns 1 on a match, 0 on no
 * match, or a negative error, with the bad byte's offset in ov[0] for a
 * UTF error. Makes no Lua call. */
static int lre_search(const ludo__lre_ctx_t *ctx, ludo__lre_regex_t *rx,
                      const char *s, size_t len, size_t off, uint32_t flags,
                      size_t *ov) {
  const size_t *src;
  size_t pairs, i, set;
  int rc;
  if (rx->node == NULL) return LUDO_L_RE_EFREED;
  rc = ludo__regex_exec(&rx->node->re, s, len, off, flags, &ctx->lim);
  if (rc < 0) {
    if (ludo__regex_is_utf_error(rc))
      ov[0] = ludo__regex_bad_offset(&rx->node->re);
    return rc;
  }
  if (rc == 0) return 0;
  src = ludo__regex_ovector(&rx->node->re);
  pairs = (size_t)rx->node->re.ngroups + 1;
  set = (size_t)rc < pairs ? (size_t)rc : pairs;
  for (i = 0; i < 2 * set; i++) ov[i] = src[i];
  for (; i < 2 * pairs; i++) ov[i] = LUDO_RE_UNSET;
  return 1;
}

/* Finds the next match of an iteration. After an empty match the next
 * search asks for a non-empty match at the same offset, then steps one
 * character (pcre2demo's scheme, as Perl and Python do). Only the first
 * search checks UTF-8: later offsets are character boundaries.
 * Returns 1 (offsets in `ov`), 0 at the end, or a negative error. */
static int lre_next(const ludo__lre_ctx_t *ctx, ludo__lre_regex_t *rx,
                    const char *s, size_t len, ludo__lre_iter_t *it,
                    size_t *ov) {
  const uint32_t retry =
      LUDO_RE_EXEC_NOTEMPTY_ATSTART | LUDO_RE_EXEC_ANCHORED;
  int rc;
  for (;;) {
    if (it->done) return 0;
    rc = lre_search(ctx, rx, s, len, it->pos, it->flags, ov);
    if (rc < 0) {
      it->done = 1;
      return rc;
    }
    if (rc == 0) {
      if (!(it->flags & retry) || it->pos >= len) {
        it->done = 1;
        return 0;
      }
      it->pos = ludo__regex_advance(&rx->node->re, s, len, it->pos);
      it->flags &= ~retry;
      continue;
    }
    it->flags |= LUDO_RE_EXEC_NO_UTF_CHECK;
    if (ov[1] < it->pos) { /* cannot happen without \K in lookarounds */
      it->pos = ludo__regex_advance(&rx->node->re, s, len, it->pos);
      it->flags &= ~retry;
    } else if (ov[0] == ov[1]) {
      it->pos = ov[1];
      it->flags |= retry;
    } else {
      it->pos = ov[1];
      it->flags &= ~retry;
    }
    return 1;
  }
}

/* Pushes capture `i` of subject `s`: a string, or false when unset.
 * [-0, +1, m] */
static void lre_push_cap(lua_State *L, const char *s, const size_t *ov,
                         uint32_t i) {
  size_t b = ov[2 * i], e = ov[2 * i + 1];
  if (b == LUDO_RE_UNSET) {
    lua_pushboolean(L, 0);
    return;
  }
  lua_pushlstring(L, s + b, e > b ? e - b : 0);
}

/* Pushes the match table: m[0] whole match, m[1..n] captures (false when
 * unset), m.name for named groups (with duplicate names, the first set
 * group of that name).
 * [-0, +1, m] */
static void lre_push_match(lua_State *L, const ludo__lre_regex_t *rx,
                           const char *s, const size_t *ov) {
  uint32_t i, g;
  lua_createtable(L, (int)rx->node->re.ngroups,
                  1 + (int)rx->node->re.name_count);
  for (i = 0; i <= rx->node->re.ngroups; i++) {
    lre_push_cap(L, s, ov, i);
    lua_rawseti(L, -2, i);
  }
  for (i = 0; i < rx->node->re.name_count; i++) {
    const char *name = ludo__regex_name(&rx->node->re, i, &g);
    int set = ov[2 * g] != LUDO_RE_UNSET;
    int have = lua_getfield(L, -1, name); /* stack: m current */
    lua_pop(L, 1);
    if (have == LUA_TSTRING || (!set && have != LUA_TNIL)) continue;
    lua_rawgeti(L, -1, g);
    lua_setfield(L, -2, name);
  }
}

/* Reads an optional 1-based start position at `idx` like string.find
 * (negative counts from the end). Returns the byte offset, or len + 1 when
 * it lies past the end (no match possible).
 * [-0, +0, v] */
static size_t lre_init(lua_State *L, int idx, size_t len) {
  lua_Integer i = luaL_optinteger(L, idx, 1);
  if (i > 0) {
    if ((lua_Unsigned)i > (lua_Unsigned)len + 1) return len + 1;
    return (size_t)i - 1;
  }
  if (i == 0 || (lua_Unsigned)-(i + 1) >= (lua_Unsigned)len) return 0;
  return len + (size_t)i; /* len + i + 1, as an offset */
}

/* match/find on the regex at `rxi`: subject at `si`, init at `ii`.
 * [-0, +(1|n), m] */
static int lre_match(lua_State *L, int rxi, int si, int ii, int find) {
  ludo__lre_regex_t *rx = lua_touserdata(L, rxi);
  size_t len, off, *ov;
  const char *s = lua_tolstring(L, si, &len);
  ludo__lre_ov_t box;
  uint32_t i;
  int rc;
  off = lre_init(L, ii, len);
  if (off > len) {
    luaL_pushfail(L);
    return 1;
  }
  ov = lre_ov(L, &box, rx);
  rc = lre_search(lre_ctx(L), rx, s, len, off, 0, ov);
  if (rc < 0) return lre_exec_fail(L, lre_ctx(L), rc, ov[0], off);
  if (rc == 0) {
    luaL_pushfail(L);
    return 1;
  }
  if (!find) {
    lre_push_match(L, rx, s, ov);
    return 1;
  }
  luaL_checkstack(L, (int)rx->node->re.ngroups + 2, "too many captures");
  lua_pushinteger(L, (lua_Integer)ov[0] + 1);
  lua_pushinteger(L, (lua_Integer)ov[1]);
  for (i = 1; i <= rx->node->re.ngroups; i++) lre_push_cap(L, s, ov, i);
  return 2 + (int)rx->node->re.ngroups;
}

/* The gmatch iterator. Upvalues: context, regex, subject, iteration state.
 * [-0, +(0|1|3), m] */
static int lre_gmatch_aux(lua_State *L) {
  ludo__lre_regex_t *rx = lua_touserdata(L, lua_upvalueindex(2));
  ludo__lre_iter_t *it = lua_touserdata(L, lua_upvalueindex(4));
  size_t len, pos = it->pos, *ov;
  const char *s = lua_tolstring(L, lua_upvalueindex(3), &len);
  ludo__lre_ov_t box;
  int rc;
  ov = lre_ov(L, &box, rx);
  rc = lre_next(lre_ctx(L), rx, s, len, it, ov);
  if (rc < 0) return lre_exec_fail(L, lre_ctx(L), rc, ov[0], pos);
  if (rc == 0) return 0;
  lre_push_match(L, rx, s, ov);
  return 1;
}

/* Pushes a gmatch iterator over the subject at `si` for the regex at rxi.
 * [-0, +1, m] */
static int lre_gmatch(lua_State *L, int rxi, int si) {
  ludo__lre_iter_t *it;
  lua_pushvalue(L, LRE_CTX_IDX);
  lua_pushvalue(L, rxi);
  lua_pushvalue(L, si);
  it = lua_newuserdatauv(L, sizeof(*it), 0);
  memset(it, 0, sizeof(*it));
  lua_pushcclosure(L, lre_gmatch_aux, 4);
  return 1;
}

/* ---------------------------------------------------------------------
 * Replacement templates: $0 $1 ... $nn, ${n}, ${name}, $$ */

enum { LRE_REF_DOLLAR, LRE_REF_GROUP, LRE_REF_NAME, LRE_REF_BAD };

/* Parses the reference after the '$' at t[i - 1]. Stores the group number
 * or the name span, and the offset after the reference in *next. */
static int lre_tmpl_ref(const char *t, size_t len, size_t i, size_t *next,
                        uint32_t *group, const char **name, size_t *nlen) {
  size_t j;
  int brace = 0;
  uint32_t g = 0;
  if (i < len && t[i] == '$') {
    *next = i + 1;
    return LRE_REF_DOLLAR;
  }
  if (i < len && t[i] == '{') {
    brace = 1;
    i++;
  }
  j = i;
  if (j < len && t[j] >= '0' && t[j] <= '9') {
    while (j < len && t[j] >= '0' && t[j] <= '9') {
      g = g * 10 + (uint32_t)(t[j] - '0');
      if (g > 65535) return LRE_REF_BAD;
      j++;
    }
    if (brace) {
      if (j >= len || t[j] != '}') return LRE_REF_BAD;
      j++;
    }
    *group = g;
    *next = j;
    return LRE_REF_GROUP;
  }
  if (!brace) return LRE_REF_BAD;
  while (j < len && (t[j] == '_' || (t[j] >= 'a' && t[j] <= 'z') ||
                     (t[j] >= 'A' && t[j] <= 'Z') ||
                     (t[j] >= '0' && t[j] <= '9')))
    j++;
  if (j == i || j >= len || t[j] != '}') return LRE_REF_BAD;
  *name = t + i;
  *nlen = j - i;
  *next = j + 1;
  return LRE_REF_NAME;
}

/* The group a name refers to: with offsets `ov`, the first set group of
 * that name (or the first group when none is set); without, any group.
 * Returns 0 when the name is unknown. */
static uint32_t lre_name_group(const ludo__lre_regex_t *rx, const char *n,
                               size_t nlen, const size_t *ov) {
  uint32_t i, g, first = 0;
  for (i = 0; i < rx->node->re.name_count; i++) {
    const char *name = ludo__regex_name(&rx->node->re, i, &g);
    if (strlen(name) != nlen || memcmp(name, n, nlen) != 0) continue;
    if (ov == NULL || ov[2 * g] != LUDO_RE_UNSET) return g;
    if (first == 0) first = g;
  }
  return first;
}

/* Checks template `t` against the groups of `rx`. Returns 0, or pushes the
 * failure triple and returns 3.
 * [-0, +(0|3), m] */
static int lre_tmpl_check(lua_State *L, const ludo__lre_regex_t *rx,
                          const char *t, size_t len) {
  size_t i = 0, next, nlen = 0;
  const char *name = NULL, *d;
  uint32_t g = 0;
  while (i < len && (d = memchr(t + i, '$', len - i)) != NULL) {
    size_t at = (size_t)(d - t);
    switch (lre_tmpl_ref(t, len, at + 1, &next, &g, &name, &nlen)) {
      case LRE_REF_GROUP:
        if (g > rx->node->re.ngroups)
          return lre_fail(L,
                          "bad replacement template: no group %d "
                          "(offset %I)",
                          (int)g, (lua_Integer)at);
        break;
      case LRE_REF_NAME:
        if (lre_name_group(rx, name, nlen, NULL) == 0) {
          lua_pushlstring(L, name, nlen);
          lre_fail(L, "bad replacement template: no group named '%s' "
                      "(offset %I)",
                   lua_tostring(L, -1), (lua_Integer)at);
          lua_remove(L, -4);
          return 3;
        }
        break;
      case LRE_REF_BAD:
        return lre_fail(L,
                        "bad replacement template: '$' at offset %I must "
                        "be followed by a group number, {name} or '$'",
                        (lua_Integer)at);
      default:
        break;
    }
    i = next;
  }
  return 0;
}

/* Appends template `t` (already checked) for the match in `ov`.
 * [-?, +?, m] (buffer use) */
static void lre_tmpl_expand(luaL_Buffer *b, const ludo__lre_regex_t *rx,
                            const char *t, size_t len, const char *s,
                            const size_t *ov) {
  size_t i = 0, next = 0, nlen = 0;
  const char *name = NULL, *d;
  uint32_t g = 0;
  while (i < len) {
    d = memchr(t + i, '$', len - i);
    if (d == NULL) {
      luaL_addlstring(b, t + i, len - i);
      return;
    }
    luaL_addlstring(b, t + i, (size_t)(d - t) - i);
    switch (lre_tmpl_ref(t, len, (size_t)(d - t) + 1, &next, &g, &name,
                         &nlen)) {
      case LRE_REF_DOLLAR:
        luaL_addchar(b, '$');
        break;
      case LRE_REF_NAME:
        g = lre_name_group(rx, name, nlen, ov);
        /* fall through */
      case LRE_REF_GROUP:
        if (ov[2 * g] != LUDO_RE_UNSET && ov[2 * g + 1] > ov[2 * g])
          luaL_addlstring(b, s + ov[2 * g], ov[2 * g + 1] - ov[2 * g]);
        break;
      default: /* checked before */
        break;
    }
    i = next;
  }
}

/* sub/gsub on the regex at `rxi`: subject at `si`, replacement at `ri`,
 * at most `max` replacements.
 * [-0, +(2|3), e] */
static int lre_gsub(lua_State *L, int rxi, int si, int ri, lua_Integer max) {
  ludo__lre_regex_t *rx = lua_touserdata(L, rxi);
  const ludo__lre_ctx_t *ctx = lre_ctx(L);
  size_t len, tlen = 0, last = 0, *ov;
  const char *s = lua_tolstring(L, si, &len), *t = NULL;
  int fn = lua_type(L, ri) == LUA_TFUNCTION, rc;
  ludo__lre_iter_t it = {0, 0, 0};
  ludo__lre_ov_t box;
  lua_Integer n = 0;
  luaL_Buffer b;

  if (!fn) {
    t = lua_tolstring(L, ri, &tlen);
    if (lre_tmpl_check(L, rx, t, tlen)) return 3;
  }
  ov = lre_ov(L, &box, rx);
  luaL_buffinit(L, &b);
  while (n < max) {
    size_t pos = it.pos;
    rc = lre_next(ctx, rx, s, len, &it, ov);
    if (rc < 0) return lre_exec_fail(L, ctx, rc, ov[0], pos);
    if (rc == 0) break;
    if (ludo__state_check(L)) return lua_error(L); /* the call's budget */
    luaL_addlstring(&b, s + last, ov[0] - last);
    if (!fn) {
      lre_tmpl_expand(&b, rx, t, tlen, s, ov);
    } else {
      lua_pushvalue(L, ri);
      lre_push_match(L, rx, s, ov);
      lua_call(L, 1, 1); /* may raise; the callback may reuse rx */
      if (!lua_toboolean(L, -1)) {
        lua_pop(L, 1);
        luaL_addlstring(&b, s + ov[0], ov[1] - ov[0]);
      } else if (!lua_isstring(L, -1)) {
        return luaL_error(L, "invalid replacement value (a %s)",
                          luaL_typename(L, -1));
      } else {
        luaL_addvalue(&b);
      }
    }
    last = ov[1];
    n++;
  }
  luaL_addlstring(&b, s + last, len - last);
  luaL_pushresult(&b);
  lua_pushinteger(L, n);
  return 2;
}

/* split on the regex at `rxi`: subject at `si`, at most `limit` pieces
 * when limit > 0. Each separator's captures follow the piece before it.
 * Empty separators at the start of a piece or at the end are skipped.
 * [-0, +(1|3), m] */
static int lre_split(lua_State *L, int rxi, int si, lua_Integer limit) {
  ludo__lre_regex_t *rx = lua_touserdata(L, rxi);
  const ludo__lre_ctx_t *ctx = lre_ctx(L);
  size_t len, start = 0, *ov;
  const char *s = lua_tolstring(L, si, &len);
  ludo__lre_iter_t it = {0, 0, 0};
  ludo__lre_ov_t box;
  lua_Integer pieces = 0, k = 0;
  uint32_t g;
  int rc, res;

  lua_newtable(L);
  res = lua_gettop(L);
  if (len == 0) return 1;
  ov = lre_ov(L, &box, rx);
  while (limit <= 0 || pieces < limit - 1) {
    size_t pos = it.pos;
    rc = lre_next(ctx, rx, s, len, &it, ov);
    if (rc < 0) return lre_exec_fail(L, ctx, rc, ov[0], pos);
    if (rc == 0) break;
    if (ludo__state_check(L)) return lua_error(L); /* the call's budget */
    if (ov[0] == ov[1] && (ov[0] == start || ov[0] == len)) continue;
    lua_pushlstring(L, s + start, ov[0] - start);
    lua_rawseti(L, res, ++k);
    pieces++;
    for (g = 1; g <= rx->node->re.ngroups; g++) {
      lre_push_cap(L, s, ov, g);
      lua_rawseti(L, res, ++k);
    }
    start = ov[1];
  }
  lua_pushlstring(L, s + start, len - start);
  lua_rawseti(L, res, ++k);
  lua_settop(L, res);
  return 1;
}

/* ---------------------------------------------------------------------
 * Module functions: re.fn(subject, pattern, ...) */

/* re.match(subject, pattern, flags?, init?) -> m | nil | nil, err, code
 * [-0, +(1|3), m] */
static int ludo_l_re_match(lua_State *L) {
  luaL_checkstring(L, 1);
  luaL_checkstring(L, 2);
  luaL_optstring(L, 3, NULL);
  luaL_optinteger(L, 4, 1);
  lua_settop(L, 4);
  if (lre_get(L, 2, 3) == NULL) return 3;
  return lre_match(L, 5, 1, 4, 0);
}

/* re.find(subject, pattern, flags?, init?) -> from, to, caps... | nil |
 * nil, err, code
 * [-0, +(1|n), m] */
static int ludo_l_re_find(lua_State *L) {
  luaL_checkstring(L, 1);
  luaL_checkstring(L, 2);
  luaL_optstring(L, 3, NULL);
  luaL_optinteger(L, 4, 1);
  lua_settop(L, 4);
  if (lre_get(L, 2, 3) == NULL) return 3;
  return lre_match(L, 5, 1, 4, 1);
}

/* re.gmatch(subject, pattern, flags?) -> iterator | nil, err, code
 * [-0, +(1|3), m] */
static int ludo_l_re_gmatch(lua_State *L) {
  luaL_checkstring(L, 1);
  luaL_checkstring(L, 2);
  luaL_optstring(L, 3, NULL);
  lua_settop(L, 3);
  if (lre_get(L, 2, 3) == NULL) return 3;
  return lre_gmatch(L, 4, 1);
}

/* Checks a replacement argument: a string, a number or a function.
 * [-0, +0, v] */
static void lre_check_repl(lua_State *L, int idx) {
  int t = lua_type(L, idx);
  if (t != LUA_TSTRING && t != LUA_TNUMBER && t != LUA_TFUNCTION)
    luaL_typeerror(L, idx, "string or function");
}

/* re.gsub(subject, pattern, repl, flags?) -> str, n | nil, err, code
 * [-0, +(2|3), e] */
static int ludo_l_re_gsub(lua_State *L) {
  luaL_checkstring(L, 1);
  luaL_checkstring(L, 2);
  lre_check_repl(L, 3);
  luaL_optstring(L, 4, NULL);
  lua_settop(L, 4);
  if (lre_get(L, 2, 4) == NULL) return 3;
  return lre_gsub(L, 5, 1, 3, LUA_MAXINTEGER);
}

/* re.sub(subject, pattern, repl, flags?) -> str, n | nil, err, code
 * [-0, +(2|3), e] */
static int ludo_l_re_sub(lua_State *L) {
  luaL_checkstring(L, 1);
  luaL_checkstring(L, 2);
  lre_check_repl(L, 3);
  luaL_optstring(L, 4, NULL);
  lua_settop(L, 4);
  if (lre_get(L, 2, 4) == NULL) return 3;
  return lre_gsub(L, 5, 1, 3, 1);
}

/* re.split(subject, pattern, flags?, limit?) -> pieces | nil, err, code
 * [-0, +(1|3), m] */
static int ludo_l_re_split(lua_State *L) {
  lua_Integer limit;
  luaL_checkstring(L, 1);
  luaL_checkstring(L, 2);
  luaL_optstring(L, 3, NULL);
  limit = luaL_optinteger(L, 4, 0);
  lua_settop(L, 4);
  if (lre_get(L, 2, 3) == NULL) return 3;
  return lre_split(L, 5, 1, limit);
}

/* re.compile(pattern, flags?) -> regex | nil, err, code
 * [-0, +(1|3), m] */
static int ludo_l_re_compile(lua_State *L) {
  luaL_checkstring(L, 1);
  luaL_optstring(L, 2, NULL);
  lua_settop(L, 2);
  return lre_get(L, 1, 2) == NULL ? 3 : 1;
}

/* re.escape(s) -> s with every ASCII byte but [A-Za-z0-9_] backslashed,
 * so that it matches itself under any flags (including "x").
 * [-0, +1, m] */
static int ludo_l_re_escape(lua_State *L) {
  size_t len, i;
  const char *s = luaL_checklstring(L, 1, &len);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c < 0x80 && c != '_' && !(c >= '0' && c <= '9') &&
        !(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z'))
      luaL_addchar(&b, '\\');
    luaL_addchar(&b, (char)c);
  }
  luaL_pushresult(&b);
  return 1;
}

/* Reads limit value at the top of the stack for key `name` in [lo, hi].
 * [-0, +0, v] */
static lua_Integer lre_limit_value(lua_State *L, const char *name,
                                   lua_Integer lo, lua_Integer hi) {
  int isint = 0;
  lua_Integer v = lua_tointegerx(L, -1, &isint);
  if (!isint || v < lo || v > hi)
    luaL_error(L, "re.limits: %s must be an integer in [%I, %I]", name, lo,
               hi);
  return v;
}

/* re.limits(t?) -> {match=, depth=, heap=}: sets the limits named in `t`
 * (for this Lua state), then returns the limits in effect.
 * [-0, +1, v] */
static int ludo_l_re_limits(lua_State *L) {
  ludo__lre_ctx_t *ctx = lre_ctx(L);
  ludo__regex_limits_t lim = ctx->lim;
  if (!lua_isnoneornil(L, 1)) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, 1)) { /* stack: t key value */
      const char *k =
          lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "";
      if (strcmp(k, "match") == 0) {
        lim.match = (uint32_t)lre_limit_value(L, "match", 1,
                                              LUDO_L_RE_MATCH_MAX);
      } else if (strcmp(k, "depth") == 0) {
        lim.depth = (uint32_t)lre_limit_value(L, "depth", 1,
                                              LUDO_L_RE_DEPTH_MAX);
      } else if (strcmp(k, "heap") == 0) {
        lua_Integer v = lre_limit_value(L, "heap", LUDO_L_RE_HEAP_MIN,
                                        LUDO_L_RE_HEAP_MAX);
        lim.heap_kib = (uint32_t)((v + 1023) / 1024);
      } else {
        lua_pushvalue(L, -2);
        return luaL_error(L,
                          "re.limits: unknown limit '%s' (expected match, "
                          "depth or heap)",
                          luaL_tolstring(L, -1, NULL));
      }
      lua_pop(L, 1);
    }
    ctx->lim = lim;
  }
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, (lua_Integer)lim.match);
  lua_setfield(L, -2, "match");
  lua_pushinteger(L, (lua_Integer)lim.depth);
  lua_setfield(L, -2, "depth");
  lua_pushinteger(L, (lua_Integer)lim.heap_kib * 1024);
  lua_setfield(L, -2, "heap");
  return 1;
}

/* ---------------------------------------------------------------------
 * Regex methods: r:fn(subject, ...) */

/* r:match(subject, init?)  [-0, +(1|3), m] */
static int ludo_l_regex_match(lua_State *L) {
  ludo_l_check_regex(L, 1);
  luaL_checkstring(L, 2);
  luaL_optinteger(L, 3, 1);
  lua_settop(L, 3);
  return lre_match(L, 1, 2, 3, 0);
}

/* r:find(subject, init?)  [-0, +(1|n), m] */
static int ludo_l_regex_find(lua_State *L) {
  ludo_l_check_regex(L, 1);
  luaL_checkstring(L, 2);
  luaL_optinteger(L, 3, 1);
  lua_settop(L, 3);
  return lre_match(L, 1, 2, 3, 1);
}

/* r:gmatch(subject)  [-0, +1, m] */
static int ludo_l_regex_gmatch(lua_State *L) {
  ludo_l_check_regex(L, 1);
  luaL_checkstring(L, 2);
  return lre_gmatch(L, 1, 2);
}

/* r:gsub(subject, repl)  [-0, +(2|3), e] */
static int ludo_l_regex_gsub(lua_State *L) {
  ludo_l_check_regex(L, 1);
  luaL_checkstring(L, 2);
  lre_check_repl(L, 3);
  return lre_gsub(L, 1, 2, 3, LUA_MAXINTEGER);
}

/* r:sub(subject, repl)  [-0, +(2|3), e] */
static int ludo_l_regex_sub(lua_State *L) {
  ludo_l_check_regex(L, 1);
  luaL_checkstring(L, 2);
  lre_check_repl(L, 3);
  return lre_gsub(L, 1, 2, 3, 1);
}

/* r:split(subject, limit?)  [-0, +(1|3), m] */
static int ludo_l_regex_split(lua_State *L) {
  lua_Integer limit;
  ludo_l_check_regex(L, 1);
  luaL_checkstring(L, 2);
  limit = luaL_optinteger(L, 3, 0);
  return lre_split(L, 1, 2, limit);
}

/* r:pattern() -> the pattern string  [-0, +1, -] */
static int ludo_l_regex_pattern(lua_State *L) {
  luaL_checkudata(L, 1, LUDO_L_REGEX_MT);
  lua_getiuservalue(L, 1, 1);
  return 1;
}

/* r:groups() -> number of capture groups  [-0, +1, -] */
static int ludo_l_regex_groups(lua_State *L) {
  ludo__lre_regex_t *rx = ludo_l_check_regex(L, 1);
  lua_pushinteger(L, (lua_Integer)rx->node->re.ngroups);
  return 1;
}

/* r:names() -> array of group names in group order (each name once)
 * [-0, +1, m] */
static int ludo_l_regex_names(lua_State *L) {
  ludo__lre_regex_t *rx = ludo_l_check_regex(L, 1);
  uint32_t i, g;
  lua_Integer n = 0;
  lua_createtable(L, (int)rx->node->re.name_count, 0); /* stack: r names */
  /* stack: r names bygroup */
  lua_createtable(L, 0, (int)rx->node->re.name_count);
  for (i = 0; i < rx->node->re.name_count; i++) {
    const char *name = ludo__regex_name(&rx->node->re, i, &g);
    lua_pushstring(L, name);
    lua_rawseti(L, -2, g);
  }
  lua_newtable(L); /* stack: r names bygroup seen */
  for (g = 1; g <= rx->node->re.ngroups; g++) {
    if (lua_rawgeti(L, -2, g) != LUA_TSTRING) { /* stack: ... name */
      lua_pop(L, 1);
      continue;
    }
    lua_pushvalue(L, -1);
    if (lua_rawget(L, -3) != LUA_TNIL) { /* stack: ... name seen? */
      lua_pop(L, 2);
      continue;
    }
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    lua_pushboolean(L, 1);
    lua_rawset(L, -4);            /* seen[name] = true */
    lua_rawseti(L, -4, ++n);      /* names[n] = name */
  }
  lua_pop(L, 2);
  return 1;
}

/* __tostring: "ludo.regex: <pattern>"  [-0, +1, m] */
static int ludo_l_regex_tostring(lua_State *L) {
  luaL_checkudata(L, 1, LUDO_L_REGEX_MT);
  lua_pushliteral(L, "ludo.regex: ");
  lua_getiuservalue(L, 1, 1);
  lua_concat(L, 2);
  return 1;
}

/* __gc of a regex: frees its node (pcre2 code and match data).
 * [-0, +0, -] */
static int ludo_l_regex_gc(lua_State *L) {
  ludo__lre_regex_t *rx = luaL_checkudata(L, 1, LUDO_L_REGEX_MT);
  if (rx->node != NULL) {
    lre_node_free(rx->node);
    rx->node = NULL;
  }
  return 0;
}

/* __gc of the context: frees the nodes whose boxes' finalizers could not
 * run. Lua calls finalizers in the reverse order of marking and the
 * context is marked before any regex, so every box still alive at
 * lua_close has been finalized by then.
 * [-0, +0, -] */
static int ludo_l_re_ctx_gc(lua_State *L) {
  ludo__lre_ctx_t *ctx = lua_touserdata(L, 1);
  while (ctx->live.next != &ctx->live) lre_node_free(ctx->live.next);
  return 0;
}

static const luaL_Reg ludo_l_re_funcs[] = {
    {"match", ludo_l_re_match},     {"find", ludo_l_re_find},
    {"gmatch", ludo_l_re_gmatch},   {"gsub", ludo_l_re_gsub},
    {"sub", ludo_l_re_sub},         {"split", ludo_l_re_split},
    {"compile", ludo_l_re_compile}, {"escape", ludo_l_re_escape},
    {"limits", ludo_l_re_limits},   {NULL, NULL}};

static const luaL_Reg ludo_l_regex_methods[] = {
    {"match", ludo_l_regex_match},     {"find", ludo_l_regex_find},
    {"gmatch", ludo_l_regex_gmatch},   {"gsub", ludo_l_regex_gsub},
    {"sub", ludo_l_regex_sub},         {"split", ludo_l_regex_split},
    {"pattern", ludo_l_regex_pattern}, {"groups", ludo_l_regex_groups},
    {"names", ludo_l_regex_names},     {NULL, NULL}};

/* Pushes this state's context, creating it (and the regex metatable) on
 * the first call.
 * [-0, +1, m] */
static void lre_push_ctx(lua_State *L) {
  ludo__lre_ctx_t *ctx;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &ludo__lre_ctx_key) ==
      LUA_TUSERDATA)
    return;
  lua_pop(L, 1);
  ctx = lua_newuserdatauv(L, sizeof(*ctx), 2); /* stack: ctx */
  ctx->lim.match = LUDO_L_RE_MATCH_DEFAULT;
  ctx->lim.depth = LUDO_L_RE_DEPTH_DEFAULT;
  ctx->lim.heap_kib = LUDO_L_RE_HEAP_DEFAULT / 1024;
  ctx->lim.stop = ludo__state_stop; /* asked as it goes: base/regex.h */
  ctx->lim.stop_ud = L;
  ctx->lim.stopped = ludo__state_stopped_ud;
  ctx->used = 0;
  ctx->hand = 1;
  ctx->live.next = ctx->live.prev = &ctx->live;
  lua_createtable(L, 0, 1); /* stack: ctx ctxmt */
  lua_pushcfunction(L, ludo_l_re_ctx_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2); /* stack: ctx */
  lua_newtable(L);
  lua_setiuservalue(L, -2, 1);
  lua_createtable(L, LUDO_L_RE_CACHE_MAX, 0);
  lua_setiuservalue(L, -2, 2);

  luaL_newmetatable(L, LUDO_L_REGEX_MT); /* stack: ctx mt */
  lua_createtable(L, 0, 9);
  lua_pushvalue(L, -3);
  luaL_setfuncs(L, ludo_l_regex_methods, 1);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, ludo_l_regex_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, ludo_l_regex_tostring);
  lua_setfield(L, -2, "__tostring");
  /* Sandboxed code must not reach __gc (getmetatable returns this). */
  lua_pushliteral(L, LUDO_L_REGEX_MT);
  lua_setfield(L, -2, "__metatable");
  lua_pop(L, 1); /* stack: ctx */

  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &ludo__lre_ctx_key);
}

LUDO_EXTERN int luaopen_ludo_re(lua_State *L) {
  lua_createtable(L, 0, 11); /* stack: M */
  lre_push_ctx(L);           /* stack: M ctx */
  luaL_setfuncs(L, ludo_l_re_funcs, 1);
  lua_pushboolean(L, ludo__regex_jit_available());
  lua_setfield(L, -2, "jit");
  return 1;
}
