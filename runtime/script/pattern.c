/* pattern.c - string.find, match, gmatch and gsub for the sandbox: Lua 5.4's
 * pattern language (manual §6.4.1) with the same results and error
 * messages as the library's, and one difference: the work is counted, and
 * the call's CPU budget is checked every PATTERN_CHECK_UNITS units, so a
 * backtracking pattern ("(.-)(.-)(.-)x" over a long subject) ends with the
 * budget's error instead of running for hours inside C, where the count
 * hook never fires (docs/sandbox.md, "Loops inside C").
 *
 * A unit is one attempt at one pattern item against one subject byte
 * (a bracket class costs its length), one step of a %b scan, or one byte
 * of a back-reference comparison: every loop below spends before it
 * works. Plain finds use memmem (linear; the library's search is
 * quadratic on inputs such as ("a"):rep(1e6) searched for
 * ("a"):rep(5e5) .. "b").
 *
 * Most patterns begin with one character class ("[^\32-\126]", "%d+",
 * "(%w+)="): the class is compiled into a 256-bit set (the "lead", below;
 * once per call, and kept per state for the next call with the same
 * short pattern), start positions whose byte is not in it are skipped at
 * one unit a byte without entering do_match (which would fail there at
 * the first item, raising nothing), and a pattern that is only that class,
 * or that class with '+', is matched from the set alone at one unit a
 * byte. A pattern the lead cannot describe exactly, or a malformed one,
 * takes the general path, so every result and error is the general
 * matcher's.
 *
 * Lua strings end with a '\0' past their length, and the matcher, like
 * the library's, reads that byte at the ends of the subject and pattern
 * (a class at the pattern's end, a frontier at the subject's end). */
#include "script/pattern.h"

#include <ctype.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include <lauxlib.h>
#include <lualib.h>

#include "script/state.h"

#define PATTERN_CHECK_UNITS 16384
#define PATTERN_MAX_DEPTH 200   /* the library's MAXCCALLS */
#define PATTERN_MAX_CAPTURES 32 /* the library's LUA_MAXCAPTURES */
#define PATTERN_ESC '%'
#define PATTERN_SPECIALS "^$*+?.([%-"

/* At most this many '(' before the lead class: far below the 32 captures
 * and 200 levels whose errors do_match would raise at a skipped start. */
#define LEAD_MAX_OPENS 8

#define CAP_UNFINISHED (-1)
#define CAP_POSITION (-2)

typedef struct {
  const char *init;
  ptrdiff_t len; /* CAP_UNFINISHED, CAP_POSITION or the length */
} capture_t;

typedef struct {
  const char *src_init, *src_end, *p_end;
  lua_State *L;
  int depth; /* recursion left */
  int level; /* captures open or closed */
  long left; /* units until the next budget check */
  capture_t capture[PATTERN_MAX_CAPTURES];
} mstate_t;

static const char *do_match(mstate_t *ms, const char *s, const char *p);

/* Spends n units; every PATTERN_CHECK_UNITS, raises the budget's error
 * when the call is over it. */
static inline void spend(mstate_t *ms, ptrdiff_t n) {
  if ((ms->left -= (long)n) > 0) return;
  ms->left = PATTERN_CHECK_UNITS;
  if (ludo__state_check(ms->L)) lua_error(ms->L);
}

static void mstate_init(mstate_t *ms, lua_State *L, const char *s,
                        size_t ls, const char *p, size_t lp) {
  ms->L = L;
  ms->src_init = s;
  ms->src_end = s + ls;
  ms->p_end = p + lp;
  ms->left = PATTERN_CHECK_UNITS;
}

static void mstate_reset(mstate_t *ms) {
  ms->level = 0;
  ms->depth = PATTERN_MAX_DEPTH;
}

/* The library's posrelatI: a 1-based start position, clipped to >= 1. */
static size_t start_pos(lua_Integer pos, size_t len) {
  if (pos > 0) return (size_t)pos;
  if (pos == 0 || pos < -(lua_Integer)len) return 1;
  return len + (size_t)pos + 1;
}

static int no_specials(const char *p, size_t lp) {
  size_t at = 0;
  do { /* strpbrk stops at '\0': look at every piece */
    if (strpbrk(p + at, PATTERN_SPECIALS) != NULL) return 0;
    at += strlen(p + at) + 1;
  } while (at <= lp);
  return 1;
}

/* --- one item ------------------------------------------------------- */

static int class_match(int c, int cl) {
  int res;
  switch (tolower(cl)) {
  case 'a': res = isalpha(c); break;
  case 'c': res = iscntrl(c); break;
  case 'd': res = isdigit(c); break;
  case 'g': res = isgraph(c); break;
  case 'l': res = islower(c); break;
  case 'p': res = ispunct(c); break;
  case 's': res = isspace(c); break;
  case 'u': res = isupper(c); break;
  case 'w': res = isalnum(c); break;
  case 'x': res = isxdigit(c); break;
  case 'z': res = c == 0; break; /* deprecated, still in 5.4 */
  default: return cl == c; /* %. and the like: the character itself */
  }
  if (isupper(cl)) res = !res;
  return res;
}

/* [set] from p (at '[') to ec (at its ']'). */
static int set_match(int c, const char *p, const char *ec) {
  int yes = 1;
  if (*(p + 1) == '^') {
    yes = 0;
    p++;
  }
  while (++p < ec) {
    if (*p == PATTERN_ESC) {
      p++;
      if (class_match(c, (unsigned char)*p)) return yes;
    } else if (*(p + 1) == '-' && p + 2 < ec) {
      p += 2;
      if ((unsigned char)*(p - 2) <= c && c <= (unsigned char)*p) return yes;
    } else if ((unsigned char)*p == c) {
      return yes;
    }
  }
  return !yes;
}

/* The end of the single-character class at p. */
static const char *class_end(mstate_t *ms, const char *p) {
  switch (*p++) {
  case PATTERN_ESC:
    if (p == ms->p_end)
      luaL_error(ms->L, "malformed pattern (ends with '%%')");
    return p + 1;
  case '[':
    if (*p == '^') p++;
    do {
      if (p == ms->p_end)
        luaL_error(ms->L, "malformed pattern (missing ']')");
      if (*(p++) == PATTERN_ESC && p < ms->p_end) p++;
    } while (*p != ']');
    return p + 1;
  default:
    return p;
  }
}

/* Whether the subject byte at s matches the class p..ep; spends its
 * cost. */
static int single_match(mstate_t *ms, const char *s, const char *p,
                        const char *ep) {
  int c;
  spend(ms, ep - p);
  if (s >= ms->src_end) return 0;
  c = (unsigned char)*s;
  switch (*p) {
  case '.': return 1;
  case PATTERN_ESC: return class_match(c, (unsigned char)*(p + 1));
  case '[': return set_match(c, p, ep - 1);
  default: return (unsigned char)*p == c;
  }
}

/* --- items that are not single characters ---------------------------- */

static const char *balance_match(mstate_t *ms, const char *s,
                                 const char *p) {
  int open, close, depth = 1;
  if (p >= ms->p_end - 1)
    luaL_error(ms->L, "malformed pattern (missing arguments to '%%b')");
  if (*s != *p) return NULL;
  open = *p;
  close = *(p + 1);
  while (++s < ms->src_end) {
    spend(ms, 1);
    if (*s == close) {
      if (--depth == 0) return s + 1;
    } else if (*s == open) {
      depth++;
    }
  }
  return NULL;
}

static const char *max_expand(mstate_t *ms, const char *s, const char *p,
                              const char *ep) {
  ptrdiff_t i = 0;
  while (single_match(ms, s + i, p, ep)) i++;
  for (; i >= 0; i--) { /* the longest first, then shorter */
    const char *res = do_match(ms, s + i, ep + 1);
    if (res != NULL) return res;
  }
  return NULL;
}

static const char *min_expand(mstate_t *ms, const char *s, const char *p,
                              const char *ep) {
  for (;;) {
    const char *res = do_match(ms, s, ep + 1);
    if (res != NULL) return res;
    if (!single_match(ms, s, p, ep)) return NULL;
    s++;
  }
}

static const char *capture_open(mstate_t *ms, const char *s, const char *p,
                                ptrdiff_t what) {
  const char *res;
  int level = ms->level;
  if (level >= PATTERN_MAX_CAPTURES) luaL_error(ms->L, "too many captures");
  ms->capture[level].init = s;
  ms->capture[level].len = what;
  ms->level = level + 1;
  if ((res = do_match(ms, s, p)) == NULL) ms->level--;
  return res;
}

static const char *capture_close(mstate_t *ms, const char *s,
                                 const char *p) {
  const char *res;
  int l = ms->level - 1;
  while (l >= 0 && ms->capture[l].len != CAP_UNFINISHED) l--;
  if (l < 0) {
    luaL_error(ms->L, "invalid pattern capture");
    return NULL;
  }
  ms->capture[l].len = s - ms->capture[l].init;
  if ((res = do_match(ms, s, p)) == NULL)
    ms->capture[l].len = CAP_UNFINISHED;
  return res;
}

/* %1..%9 in a pattern: the text of a closed capture again. */
static const char *backref_match(mstate_t *ms, const char *s, int digit) {
  int l = digit - '1';
  size_t len;
  if (l < 0 || l >= ms->level || ms->capture[l].len == CAP_UNFINISHED)
    luaL_error(ms->L, "invalid capture index %%%d", l + 1);
  len = (size_t)ms->capture[l].len; /* a position capture never matches */
  if ((size_t)(ms->src_end - s) < len) return NULL;
  spend(ms, (ptrdiff_t)len);
  return memcmp(ms->capture[l].init, s, len) == 0 ? s + len : NULL;
}

/* Matches the pattern from p against the subject from s: the end of the
 * match, or NULL. Tail positions loop instead of recursing. */
static const char *do_match(mstate_t *ms, const char *s, const char *p) {
  if (ms->depth-- == 0) luaL_error(ms->L, "pattern too complex");
  spend(ms, 1);
again:
  if (p == ms->p_end) goto done;
  switch (*p) {
  case '(':
    if (*(p + 1) == ')')
      s = capture_open(ms, s, p + 2, CAP_POSITION);
    else
      s = capture_open(ms, s, p + 1, CAP_UNFINISHED);
    goto done;
  case ')':
    s = capture_close(ms, s, p + 1);
    goto done;
  case '$':
    if (p + 1 != ms->p_end) break; /* not at the end: a character */
    s = s == ms->src_end ? s : NULL;
    goto done;
  case PATTERN_ESC:
    switch (*(p + 1)) {
    case 'b':
      s = balance_match(ms, s, p + 2);
      if (s == NULL) goto done;
      p += 4;
      goto again;
    case 'f': {
      const char *ep;
      int prev;
      p += 2;
      if (*p != '[') luaL_error(ms->L, "missing '[' after '%%f' in pattern");
      ep = class_end(ms, p);
      prev = s == ms->src_init ? 0 : (unsigned char)*(s - 1);
      spend(ms, 2 * (ep - p));
      if (!set_match(prev, p, ep - 1) &&
          set_match((unsigned char)*s, p, ep - 1)) {
        p = ep;
        goto again;
      }
      s = NULL;
      goto done;
    }
    case '0': case '1': case '2': case '3': case '4':
    case '5': case '6': case '7': case '8': case '9':
      s = backref_match(ms, s, (unsigned char)*(p + 1));
      if (s == NULL) goto done;
      p += 2;
      goto again;
    default:
      break; /* a class: below */
    }
    break;
  default:
    break;
  }
  { /* a single-character class with an optional repetition */
    const char *ep = class_end(ms, p);
    if (!single_match(ms, s, p, ep)) {
      if (*ep == '*' || *ep == '?' || *ep == '-') {
        p = ep + 1; /* zero times */
        goto again;
      }
      s = NULL;
      goto done;
    }
    switch (*ep) {
    case '?': {
      const char *res = do_match(ms, s + 1, ep + 1);
      if (res != NULL) {
        s = res;
        goto done;
      }
      p = ep + 1;
      goto again;
    }
    case '+':
      s = max_expand(ms, s + 1, p, ep);
      goto done;
    case '*':
      s = max_expand(ms, s, p, ep);
      goto done;
    case '-':
      s = min_expand(ms, s, p, ep);
      goto done;
    default:
      s++;
      p = ep;
      goto again;
    }
  }
done:
  ms->depth++;
  return s;
}

/* --- the lead: the pattern's first class as a byte set ---------------- */

typedef enum {
  LEAD_NONE,  /* no filter: every start goes through do_match */
  LEAD_FIRST, /* a match needs its first byte in the set */
  LEAD_ONE,   /* the pattern is the class alone: a match is one byte */
  LEAD_RUN    /* the pattern is the class and '+': the longest run */
} lead_kind_t;

typedef struct {
  uint64_t set[4]; /* bit c: byte c matches the class */
  lead_kind_t kind;
} lead_t;

static int lead_has(const lead_t *ld, int c) {
  return (int)((ld->set[c >> 6] >> (c & 63)) & 1);
}

static void bits_add(uint64_t set[4], int c) {
  set[c >> 6] |= (uint64_t)1 << (c & 63);
}

/* Adds the bytes lo..hi (none when lo > hi). */
static void bits_range(uint64_t set[4], int lo, int hi) {
  int w;
  if (lo > hi) return;
  for (w = lo >> 6; w <= hi >> 6; w++) {
    uint64_t m = ~(uint64_t)0;
    if (w == lo >> 6) m &= ~(uint64_t)0 << (lo & 63);
    if (w == hi >> 6) m &= ~(uint64_t)0 >> (63 - (hi & 63));
    set[w] |= m;
  }
}

/* class_match's answers for every letter class over every byte, filled
 * once by class_match itself so the two cannot disagree (other %x are
 * the byte x). */
static uint64_t class_bits[52][4];
static pthread_once_t class_once = PTHREAD_ONCE_INIT;

static int letter_index(int cl) {
  if (cl >= 'a' && cl <= 'z') return cl - 'a';
  if (cl >= 'A' && cl <= 'Z') return 26 + cl - 'A';
  return -1;
}

static void class_fill(void) {
  int cl, c;
  for (cl = 0; cl < 256; cl++) {
    int i = letter_index(cl);
    if (i < 0) continue;
    for (c = 0; c < 256; c++)
      if (class_match(c, cl)) bits_add(class_bits[i], c);
  }
}

/* Adds the bytes %cl matches. */
static void bits_class(uint64_t set[4], int cl) {
  int i = letter_index(cl), w;
  if (i < 0) {
    bits_add(set, cl);
    return;
  }
  pthread_once(&class_once, class_fill);
  for (w = 0; w < 4; w++) set[w] |= class_bits[i][w];
}

/* The set of the bracket class p..ec (p at '[', ec at its ']'), read as
 * set_match reads it. */
static void bits_set(uint64_t set[4], const char *p, const char *ec) {
  int neg = 0, w;
  if (*(p + 1) == '^') {
    neg = 1;
    p++;
  }
  while (++p < ec) {
    if (*p == PATTERN_ESC) {
      p++;
      bits_class(set, (unsigned char)*p);
    } else if (*(p + 1) == '-' && p + 2 < ec) {
      bits_range(set, (unsigned char)*p, (unsigned char)*(p + 2));
      p += 2;
    } else {
      bits_add(set, (unsigned char)*p);
    }
  }
  if (neg)
    for (w = 0; w < 4; w++) set[w] = ~set[w];
}

/* class_end without its errors: NULL where class_end would raise. */
static const char *lead_class_end(const char *p, const char *p_end) {
  switch (*p++) {
  case PATTERN_ESC:
    return p == p_end ? NULL : p + 1;
  case '[':
    if (*p == '^') p++;
    do {
      if (p == p_end) return NULL;
      if (*(p++) == PATTERN_ESC && p < p_end) p++;
    } while (*p != ']');
    return p + 1;
  default:
    return p;
  }
}

/* Compiles the lead of the pattern p..p_end (after any '^' anchor); never
 * raises: a pattern it cannot describe is LEAD_NONE. The class's length
 * is spent once, as one general attempt would spend it. */
static void lead_compile(mstate_t *ms, lead_t *ld, const char *p,
                         const char *p_end) {
  const char *q = p, *ep;
  int opens = 0;
  ld->kind = LEAD_NONE;
  /* Captures open at the same position: skipping a start is still right
   * when the class after them fails there. */
  while (q < p_end && *q == '(') {
    q += *(q + 1) == ')' ? 2 : 1;
    if (++opens > LEAD_MAX_OPENS) return;
  }
  if (q == p_end || *q == ')') return;
  if (*q == '$' && q + 1 == p_end) return;
  if (*q == PATTERN_ESC &&
      (*(q + 1) == 'b' || *(q + 1) == 'f' ||
       isdigit((unsigned char)*(q + 1))))
    return;
  ep = lead_class_end(q, p_end);
  if (ep == NULL) return;
  /* with '*', '?' or '-' the class may match nothing: no filter */
  if (*ep == '*' || *ep == '?' || *ep == '-') return;
  spend(ms, ep - q);
  memset(ld->set, 0, sizeof ld->set);
  switch (*q) {
  case '.': memset(ld->set, 0xff, sizeof ld->set); break;
  case PATTERN_ESC: bits_class(ld->set, (unsigned char)*(q + 1)); break;
  case '[': bits_set(ld->set, q, ep - 1); break;
  default: bits_add(ld->set, (unsigned char)*q); break;
  }
  if (opens == 0 && ep == p_end)
    ld->kind = LEAD_ONE;
  else if (opens == 0 && *ep == '+' && ep + 1 == p_end)
    ld->kind = LEAD_RUN;
  else
    ld->kind = LEAD_FIRST;
}

/* The first start from s where a match may begin: s itself without a
 * lead, else the first byte in the set, or src_end when there is none
 * (where lead_match fails). One unit per byte passed, spent a chunk at a
 * time so a long scan still meets the budget's checks. */
static const char *lead_skip(mstate_t *ms, const lead_t *ld, const char *s) {
  if (ld->kind == LEAD_NONE) return s;
  for (;;) {
    const char *from = s, *stop = ms->src_end;
    if (stop - s > PATTERN_CHECK_UNITS) stop = s + PATTERN_CHECK_UNITS;
    while (s < stop && !lead_has(ld, (unsigned char)*s)) s++;
    spend(ms, s - from);
    if (s < stop || s == ms->src_end) return s;
  }
}

/* mstate_reset and do_match(ms, s, p), with what the lead knows: the end
 * of the match at s, or NULL. */
static const char *lead_match(mstate_t *ms, const lead_t *ld, const char *s,
                              const char *p) {
  mstate_reset(ms);
  if (ld->kind == LEAD_NONE) return do_match(ms, s, p);
  spend(ms, 1);
  if (s >= ms->src_end || !lead_has(ld, (unsigned char)*s)) return NULL;
  switch (ld->kind) {
  case LEAD_ONE:
    return s + 1;
  case LEAD_RUN:
    while (++s < ms->src_end && lead_has(ld, (unsigned char)*s))
      spend(ms, 1);
    return s;
  default:
    return do_match(ms, s, p);
  }
}

/* The last pattern's lead, per state (the functions' shared upvalue 1):
 * a rubric's find in every step compiles its class once. The pattern
 * string is kept alive as the cache's user value, so while p is cached
 * no other string can have that address: equal p and length mean the
 * same text. Only short patterns are kept, so a dropped big one is still
 * collected (and stops counting against the memory cap). */
#define LEAD_CACHE_MAX 256

typedef struct {
  const char *p; /* after any '^' */
  size_t lp;
  int plain;     /* no specials in the whole pattern (find's test) */
  lead_t ld;
} lead_cache_t;

/* Sets *ld to the lead of the pattern at stack index parg, whose text
 * after any '^' is p..ms->p_end, and returns whether the whole pattern
 * has no specials: from the cache, or compiled (and cached when short).
 * [-0, +0, -] */
static int lead_get(lua_State *L, mstate_t *ms, int parg, const char *p,
                    lead_t *ld) {
  lead_cache_t *c = lua_touserdata(L, lua_upvalueindex(1));
  size_t lp = (size_t)(ms->p_end - p), lall;
  const char *all;
  int plain;
  if (c->p == p && c->lp == lp) {
    *ld = c->ld;
    return c->plain;
  }
  lead_compile(ms, ld, p, ms->p_end);
  all = lua_tolstring(L, parg, &lall);
  plain = no_specials(all, lall);
  if (lall <= LEAD_CACHE_MAX) {
    lua_pushvalue(L, parg);
    lua_setiuservalue(L, lua_upvalueindex(1), 1);
    c->p = p;
    c->lp = lp;
    c->plain = plain;
    c->ld = *ld;
  }
  return plain;
}

/* --- captures to Lua ------------------------------------------------- */

/* Capture i of the match s..e: its text in *cap and its length, or
 * CAP_POSITION with the position pushed. i == 0 with no captures is the
 * whole match. */
static ptrdiff_t capture_get(mstate_t *ms, int i, const char *s,
                             const char *e, const char **cap) {
  ptrdiff_t len;
  if (i >= ms->level) {
    if (i != 0) luaL_error(ms->L, "invalid capture index %%%d", i + 1);
    *cap = s;
    return e - s;
  }
  len = ms->capture[i].len;
  *cap = ms->capture[i].init;
  if (len == CAP_UNFINISHED) luaL_error(ms->L, "unfinished capture");
  if (len == CAP_POSITION)
    lua_pushinteger(ms->L, (ms->capture[i].init - ms->src_init) + 1);
  return len;
}

static void capture_push(mstate_t *ms, int i, const char *s,
                         const char *e) {
  const char *cap;
  ptrdiff_t len = capture_get(ms, i, s, e, &cap);
  if (len != CAP_POSITION) lua_pushlstring(ms->L, cap, (size_t)len);
}

/* Pushes the captures, or the whole match (when s is not NULL) if there
 * are none. */
static int captures_push(mstate_t *ms, const char *s, const char *e) {
  int i, n = (ms->level == 0 && s != NULL) ? 1 : ms->level;
  luaL_checkstack(ms->L, n, "too many captures");
  for (i = 0; i < n; i++) capture_push(ms, i, s, e);
  return n;
}

/* --- the library functions ------------------------------------------- */

static int find_aux(lua_State *L, int find) {
  size_t ls, lp, init;
  const char *s = luaL_checklstring(L, 1, &ls);
  const char *p = luaL_checklstring(L, 2, &lp);
  mstate_t ms;
  lead_t ld;
  int anchor, plain = find && lua_toboolean(L, 4);
  init = start_pos(luaL_optinteger(L, 3, 1), ls) - 1;
  if (init > ls) {
    luaL_pushfail(L);
    return 1;
  }
  anchor = *p == '^';
  mstate_init(&ms, L, s, ls, p + anchor, lp - (size_t)anchor);
  if (!plain) plain = lead_get(L, &ms, 2, p + anchor, &ld) && find;
  if (plain) {
    const char *at = memmem(s + init, ls - init, p, lp);
    if (at != NULL) {
      lua_pushinteger(L, (at - s) + 1);
      lua_pushinteger(L, (lua_Integer)((size_t)(at - s) + lp));
      return 2;
    }
  } else {
    const char *s1 = s + init;
    p += anchor;
    do {
      const char *e;
      if (!anchor) s1 = lead_skip(&ms, &ld, s1);
      if ((e = lead_match(&ms, &ld, s1, p)) != NULL) {
        if (!find) return captures_push(&ms, s1, e);
        lua_pushinteger(L, (s1 - s) + 1);
        lua_pushinteger(L, e - s);
        return captures_push(&ms, NULL, 0) + 2;
      }
    } while (s1++ < ms.src_end && !anchor);
  }
  luaL_pushfail(L);
  return 1;
}

static int p_find(lua_State *L) { return find_aux(L, 1); }

static int p_match(lua_State *L) { return find_aux(L, 0); }

/* gmatch's iterator state (upvalue 3; upvalues 1 and 2 keep the subject
 * and the pattern alive). */
typedef struct {
  const char *src, *p, *last;
  mstate_t ms;
  lead_t ld;
} gmatch_t;

static int gmatch_next(lua_State *L) {
  gmatch_t *gm = lua_touserdata(L, lua_upvalueindex(3));
  const char *src;
  gm->ms.L = L;
  for (src = gm->src; src <= gm->ms.src_end; src++) {
    const char *e;
    src = lead_skip(&gm->ms, &gm->ld, src);
    e = lead_match(&gm->ms, &gm->ld, src, gm->p);
    if (e != NULL && e != gm->last) {
      gm->src = gm->last = e;
      return captures_push(&gm->ms, src, e);
    }
  }
  gm->src = src; /* a later call starts past the end at once */
  return 0;
}

static int p_gmatch(lua_State *L) {
  size_t ls, lp, init;
  const char *s = luaL_checklstring(L, 1, &ls);
  const char *p = luaL_checklstring(L, 2, &lp);
  gmatch_t *gm;
  init = start_pos(luaL_optinteger(L, 3, 1), ls) - 1;
  lua_settop(L, 2);
  gm = lua_newuserdatauv(L, sizeof *gm, 0);
  if (init > ls) init = ls + 1;
  mstate_init(&gm->ms, L, s, ls, p, lp);
  lead_get(L, &gm->ms, 2, p, &gm->ld);
  gm->src = s + init;
  gm->p = p;
  gm->last = NULL;
  lua_pushcclosure(L, gmatch_next, 3);
  return 1;
}

/* A string replacement with %0..%9 and %%. */
static void add_string(mstate_t *ms, luaL_Buffer *b, const char *s,
                       const char *e) {
  size_t l;
  lua_State *L = ms->L;
  const char *news = lua_tolstring(L, 3, &l), *p;
  while ((p = memchr(news, PATTERN_ESC, l)) != NULL) {
    luaL_addlstring(b, news, (size_t)(p - news));
    p++;
    if (*p == PATTERN_ESC) {
      luaL_addchar(b, *p);
    } else if (*p == '0') {
      luaL_addlstring(b, s, (size_t)(e - s));
    } else if (isdigit((unsigned char)*p)) {
      const char *cap;
      ptrdiff_t len = capture_get(ms, *p - '1', s, e, &cap);
      if (len == CAP_POSITION)
        luaL_addvalue(b);
      else
        luaL_addlstring(b, cap, (size_t)len);
    } else {
      luaL_error(L, "invalid use of '%c' in replacement string",
                 PATTERN_ESC);
    }
    spend(ms, p + 1 - news);
    l -= (size_t)(p + 1 - news);
    news = p + 1;
  }
  luaL_addlstring(b, news, l);
}

/* Adds the replacement of the match s..e; whether the text changed. */
static int add_value(mstate_t *ms, luaL_Buffer *b, const char *s,
                     const char *e, int tr) {
  lua_State *L = ms->L;
  if (tr == LUA_TFUNCTION) {
    int n;
    lua_pushvalue(L, 3);
    n = captures_push(ms, s, e);
    lua_call(L, n, 1);
  } else if (tr == LUA_TTABLE) {
    capture_push(ms, 0, s, e);
    lua_gettable(L, 3);
  } else {
    add_string(ms, b, s, e);
    return 1;
  }
  if (!lua_toboolean(L, -1)) {
    lua_pop(L, 1);
    luaL_addlstring(b, s, (size_t)(e - s));
    return 0;
  }
  if (!lua_isstring(L, -1))
    return luaL_error(L, "invalid replacement value (a %s)",
                      luaL_typename(L, -1));
  luaL_addvalue(b);
  return 1;
}

static int p_gsub(lua_State *L) {
  size_t srcl, lp;
  const char *src = luaL_checklstring(L, 1, &srcl);
  const char *p = luaL_checklstring(L, 2, &lp);
  const char *last = NULL;
  int tr = lua_type(L, 3);
  lua_Integer max_s = luaL_optinteger(L, 4, (lua_Integer)srcl + 1);
  int anchor = *p == '^', changed = 0;
  lua_Integer n = 0;
  mstate_t ms;
  lead_t ld;
  luaL_Buffer b;
  luaL_argexpected(L, tr == LUA_TNUMBER || tr == LUA_TSTRING ||
                   tr == LUA_TFUNCTION || tr == LUA_TTABLE, 3,
                   "string/function/table");
  if (anchor) {
    p++;
    lp--;
  }
  mstate_init(&ms, L, src, srcl, p, lp);
  lead_get(L, &ms, 2, p, &ld);
  luaL_buffinit(L, &b);
  while (n < max_s) {
    const char *e;
    if (!anchor) { /* skipped starts would each add their byte */
      const char *at = lead_skip(&ms, &ld, src);
      luaL_addlstring(&b, src, (size_t)(at - src));
      src = at;
    }
    e = lead_match(&ms, &ld, src, p);
    if (e != NULL && e != last) {
      n++;
      changed = add_value(&ms, &b, src, e, tr) | changed;
      src = last = e;
    } else if (src < ms.src_end) {
      luaL_addchar(&b, *src++);
    } else {
      break;
    }
    if (anchor) break;
  }
  if (!changed) {
    lua_pushvalue(L, 1);
  } else {
    luaL_addlstring(&b, src, (size_t)(ms.src_end - src));
    luaL_pushresult(&b);
  }
  lua_pushinteger(L, n);
  return 2;
}

void ludo__pattern_install(lua_State *L) {
  static const luaL_Reg fns[] = {{"find", p_find},
                                 {"match", p_match},
                                 {"gmatch", p_gmatch},
                                 {"gsub", p_gsub},
                                 {NULL, NULL}};
  lead_cache_t *c;
  lua_getglobal(L, LUA_STRLIBNAME);
  c = lua_newuserdatauv(L, sizeof *c, 1);
  memset(c, 0, sizeof *c);
  luaL_setfuncs(L, fns, 1); /* the cache: every function's upvalue 1 */
  lua_pop(L, 1);
}
