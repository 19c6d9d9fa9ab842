/* json.c - JSON <-> Lua values (see json.h). */
#include "script/json.h"

#include <jansson.h>
#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char null_key = 'n';  /* registry: the null sentinel */
static const char array_key = 'a'; /* registry: the array metatable */
static const char box_key = 'b';   /* registry: the decode box */

void ludo__json_setup(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &null_key) == LUA_TNIL) {
    lua_pop(L, 1);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "ludo.null");
    lua_call(L, 1, 1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &null_key);
  } else {
    lua_pop(L, 1);
  }
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &array_key) == LUA_TNIL) {
    lua_pop(L, 1);
    lua_createtable(L, 0, 2);
    lua_pushliteral(L, "ludo.json.array");
    lua_setfield(L, -2, "__name");
    lua_rawsetp(L, LUA_REGISTRYINDEX, &array_key);
  } else {
    lua_pop(L, 1);
  }
}

void ludo__json_pushnull(lua_State *L) {
  lua_rawgetp(L, LUA_REGISTRYINDEX, &null_key);
}

int ludo__json_is_array(lua_State *L, int idx) {
  int r = 0;
  if (lua_type(L, idx) == LUA_TTABLE && lua_getmetatable(L, idx)) {
    lua_rawgetp(L, LUA_REGISTRYINDEX, &array_key);
    r = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
  }
  return r;
}

/* ---- paths for error messages ---------------------------------------- */

typedef struct {
  const char *key; /* NULL: array index */
  size_t klen;
  lua_Integer index;
} path_elem_t;

typedef struct {
  path_elem_t elems[LUDO__JSON_MAXDEPTH + 2];
  int n;
} path_t;

/* Pushes "$.a[2].b" for the current path. [-0, +1, m] */
static void push_path(lua_State *L, const path_t *p) {
  luaL_Buffer b;
  int i;
  luaL_buffinit(L, &b);
  luaL_addchar(&b, '$');
  for (i = 0; i < p->n; i++) {
    if (p->elems[i].key != NULL) {
      luaL_addchar(&b, '.');
      luaL_addlstring(&b, p->elems[i].key,
                      p->elems[i].klen > 64 ? 64 : p->elems[i].klen);
    } else {
      char tmp[32];
      snprintf(tmp, sizeof tmp, "[%lld]", (long long)p->elems[i].index);
      luaL_addstring(&b, tmp);
    }
  }
  luaL_pushresult(&b);
}

/* ---- decoding -------------------------------------------------------- */

typedef struct {
  json_t *root;
} json_box_t;

static int json_box_gc(lua_State *L) {
  json_box_t *box = lua_touserdata(L, 1);
  if (box->root) json_decref(box->root);
  box->root = NULL;
  return 0;
}

typedef struct {
  lua_State *L;
  int maxdepth;
  path_t path;
} dec_t;

static void dec_fail_depth(dec_t *d) {
  lua_State *L = d->L;
  push_path(L, &d->path);
  lua_pushfstring(L, "EPARSE: nesting deeper than %d at %s", d->maxdepth,
                  lua_tostring(L, -1));
  lua_error(L);
}

/* [-0, +1, e] */
static void dec_value(dec_t *d, json_t *v, int depth) {
  lua_State *L = d->L;
  switch (json_typeof(v)) {
    case JSON_OBJECT: {
      void *it;
      if (depth >= d->maxdepth) dec_fail_depth(d);
      luaL_checkstack(L, 4, "JSON nesting");
      lua_createtable(L, 0, (int)json_object_size(v));
      for (it = json_object_iter(v); it; it = json_object_iter_next(v, it)) {
        const char *k = json_object_iter_key(it);
        size_t klen = json_object_iter_key_len(it);
        path_elem_t *pe = &d->path.elems[d->path.n++];
        pe->key = k;
        pe->klen = klen;
        lua_pushlstring(L, k, klen);
        dec_value(d, json_object_iter_value(it), depth + 1);
        lua_rawset(L, -3);
        d->path.n--;
      }
      break;
    }
    case JSON_ARRAY: {
      size_t i, n = json_array_size(v);
      if (depth >= d->maxdepth) dec_fail_depth(d);
      luaL_checkstack(L, 4, "JSON nesting");
      lua_createtable(L, (int)n, 0);
      for (i = 0; i < n; i++) {
        path_elem_t *pe = &d->path.elems[d->path.n++];
        pe->key = NULL;
        pe->index = (lua_Integer)i;
        dec_value(d, json_array_get(v, i), depth + 1);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
        d->path.n--;
      }
      lua_rawgetp(L, LUA_REGISTRYINDEX, &array_key);
      lua_setmetatable(L, -2);
      break;
    }
    case JSON_STRING:
      lua_pushlstring(L, json_string_value(v), json_string_length(v));
      break;
    case JSON_INTEGER:
      lua_pushinteger(L, (lua_Integer)json_integer_value(v));
      break;
    case JSON_REAL:
      lua_pushnumber(L, (lua_Number)json_real_value(v));
      break;
    case JSON_TRUE:
      lua_pushboolean(L, 1);
      break;
    case JSON_FALSE:
      lua_pushboolean(L, 0);
      break;
    default:
      lua_rawgetp(L, LUA_REGISTRYINDEX, &null_key);
      break;
  }
}

/* The box that owns a jansson tree while it is converted, so a memory error
 * in the middle does not leak the tree. One box per state, kept in the
 * registry and reused: a tree left by a failed conversion is released by the
 * next decode or by the box's __gc. [-0, +1, m] */
static json_box_t *get_box(lua_State *L) {
  json_box_t *box;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &box_key) == LUA_TUSERDATA)
    return lua_touserdata(L, -1);
  lua_pop(L, 1);
  box = lua_newuserdatauv(L, sizeof *box, 0);
  box->root = NULL;
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, json_box_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &box_key);
  return box;
}

void ludo__json_decode(lua_State *L, const char *s, size_t len,
                       int maxdepth) {
  json_error_t err;
  json_box_t *box;
  dec_t d;
  json_t *root;
  if (maxdepth <= 0 || maxdepth > LUDO__JSON_MAXDEPTH)
    maxdepth = LUDO__JSON_MAXDEPTH;
  box = get_box(L);
  if (box->root) { /* left by a conversion that failed */
    json_decref(box->root);
    box->root = NULL;
  }
  root = json_loadb(s, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
  if (root == NULL) {
    if (len == 0)
      luaL_error(L, "EPARSE: empty input (expected a JSON value)");
    lua_pushfstring(L, "EPARSE: %s at line %d column %d (byte %d)", err.text,
                    err.line, err.column, err.position);
    lua_error(L);
  }
  box->root = root;
  d.L = L;
  d.maxdepth = maxdepth;
  d.path.n = 0;
  dec_value(&d, root, 0);
  json_decref(root);
  box->root = NULL;
  lua_remove(L, -2);
}

/* ---- encoding -------------------------------------------------------- */

typedef struct {
  lua_State *L;
  ludo__buf_t *b;
  int maxdepth;
  path_t path;
} enc_t;

static void enc_fail(enc_t *e, const char *what) {
  lua_State *L = e->L;
  push_path(L, &e->path);
  lua_pushfstring(L, "EVALUE: %s at %s", what, lua_tostring(L, -1));
  lua_error(L);
}

static void enc_nomem(enc_t *e) {
  luaL_error(e->L, "ENOMEM: the JSON output buffer cannot grow");
}

#define ENC_OK(e, x) \
  do {               \
    if ((x) != 0) enc_nomem(e); \
  } while (0)

/* Offset of the first byte that is not valid UTF-8, or -1. */
static long utf8_invalid_at(const unsigned char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned c = s[i];
    size_t k;
    unsigned cp;
    if (c < 0x80) {
      i++;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      k = 1;
      cp = c & 0x1f;
      if (c < 0xc2) return (long)i;
    } else if ((c & 0xf0) == 0xe0) {
      k = 2;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0 && c <= 0xf4) {
      k = 3;
      cp = c & 0x07;
    } else {
      return (long)i;
    }
    {
      size_t j;
      for (j = 1; j <= k; j++) {
        if (i + j >= n || (s[i + j] & 0xc0) != 0x80) return (long)i;
        cp = (cp << 6) | (s[i + j] & 0x3f);
      }
    }
    if ((k == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (k == 3 && (cp < 0x10000 || cp > 0x10ffff)))
      return (long)i;
    i += k + 1;
  }
  return -1;
}

static void enc_string(enc_t *e, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  ludo__buf_t *b = e->b;
  size_t i, start = 0;
  long bad = utf8_invalid_at((const unsigned char *)s, n);
  if (bad >= 0) {
    char what[64];
    snprintf(what, sizeof what, "invalid UTF-8 in string (byte %ld)", bad);
    enc_fail(e, what);
  }
  ENC_OK(e, ludo__buf_reserve(b, n + 2));
  b->p[b->len++] = '"';
  for (i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    const char *esc = NULL;
    char tmp[7];
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    switch (c) {
      case '"': esc = "\\\""; break;
      case '\\': esc = "\\\\"; break;
      case '\n': esc = "\\n"; break;
      case '\r': esc = "\\r"; break;
      case '\t': esc = "\\t"; break;
      case '\b': esc = "\\b"; break;
      case '\f': esc = "\\f"; break;
      default:
        tmp[0] = '\\'; tmp[1] = 'u'; tmp[2] = '0'; tmp[3] = '0';
        tmp[4] = hex[c >> 4]; tmp[5] = hex[c & 15]; tmp[6] = 0;
        esc = tmp;
    }
    ENC_OK(e, ludo__buf_add(b, s + start, i - start));
    ENC_OK(e, ludo__buf_adds(b, esc));
    start = i + 1;
  }
  ENC_OK(e, ludo__buf_add(b, s + start, n - start));
  ENC_OK(e, ludo__buf_addc(b, '"'));
}

/* Writes a decimal integer (faster than snprintf on the hot path). */
static void enc_integer(enc_t *e, long long v, const char *suffix) {
  char tmp[32], *p = tmp + sizeof tmp;
  unsigned long long u = v < 0 ? 0ull - (unsigned long long)v
                               : (unsigned long long)v;
  do {
    *--p = (char)('0' + u % 10);
    u /= 10;
  } while (u != 0);
  if (v < 0) *--p = '-';
  ENC_OK(e, ludo__buf_add(e->b, p, (size_t)(tmp + sizeof tmp - p)));
  if (suffix) ENC_OK(e, ludo__buf_adds(e->b, suffix));
}

/* Writes m / 10^k (m an integer, k >= 1) as decimal text, NUL-terminated,
 * ending just before `end`; returns the start. */
static char *fmt_decimal(char *end, unsigned long long m, int k, int neg) {
  char *p = end;
  int digits = 0;
  *--p = '\0';
  do {
    *--p = (char)('0' + m % 10);
    m /= 10;
    if (++digits == k) *--p = '.';
  } while (m != 0 || digits < k);
  if (*p == '.') *--p = '0';
  if (neg) *--p = '-';
  return p;
}

/* Powers of ten that are exact doubles. */
static const double p10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,
                             1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                             1e12, 1e13, 1e14, 1e15, 1e16, 1e17,
                             1e18, 1e19, 1e20, 1e21, 1e22};

/* Does m / 10^k (k <= 22, m < 2^53) read back as a? Exact: m and 10^k are
 * exact doubles and the division is correctly rounded. */
static int decimal_is(double a, int k, double *m) {
  double c = floor(a * p10[k] + 0.5);
  /* a * 10^k was rounded: the right m may be a neighbour of c. */
  if (c / p10[k] == a) { *m = c; return 1; }
  if ((c + 1) / p10[k] == a) { *m = c + 1; return 1; }
  if (c >= 1 && (c - 1) / p10[k] == a) { *m = c - 1; return 1; }
  *m = c;
  return 0;
}

/* Shortest decimals without printf, for 1e-6 <= |d| < 1e15. Up to 15
 * significant digits: the smallest k for which round(d * 10^k) / 10^k reads
 * back as d (checked exactly, see decimal_is; if k digits do, so do k+1,
 * so the smallest is found by bisection). With 16 or 17 digits: m is
 * rounded from the exact product d * 10^k (fma gives its low part) and is
 * accepted when it lies clearly within half a gap between doubles of d;
 * near that border strtod decides. Returns 0 when d is out of range. */
static int enc_short_decimal(enc_t *e, double d) {
  double a = fabs(d), m;
  char tmp[48], *p;
  int k, lo, hi, e2;
  if (!(a >= 1e-6 && a < 1e15)) return 0;
  /* The most decimals with every intermediate exact: a * 10^k < 2^53. */
  for (hi = 22; hi > 1 && a * p10[hi] >= 9007199254740992.0; hi--) {}
  if (decimal_is(a, hi, &m)) {
    lo = 1;
    while (lo < hi) {
      int mid = (lo + hi) / 2;
      double mm;
      if (decimal_is(a, mid, &mm))
        hi = mid;
      else
        lo = mid + 1;
    }
    decimal_is(a, hi, &m);
    p = fmt_decimal(tmp + sizeof tmp, (unsigned long long)m, hi, d < 0);
    ENC_OK(e, ludo__buf_add(e->b, p, (size_t)(tmp + sizeof tmp - 1 - p)));
    return 1;
  }
  frexp(a, &e2);
  {
    /* Digits before the point (may be <= 0 for a < 1). */
    int intd = (int)floor(log10(a)) + 1, sig;
    for (sig = 16; sig <= 17; sig++) {
      double P, ph, pl, fl, frac, diff, thr;
      long long mi;
      k = sig - intd;
      if (k < 1 || k > 22) continue;
      P = p10[k];
      ph = a * P;
      pl = fma(a, P, -ph); /* a * P == ph + pl exactly */
      if (ph >= 9.0e18) return 0;
      fl = floor(ph);
      frac = (ph - fl) + pl;
      mi = (long long)fl + (long long)floor(frac + 0.5);
      diff = fabs((double)(mi - (long long)fl) - frac); /* |m - a*P| */
      /* Half the smaller gap between a and its neighbours, times P. */
      thr = ldexp(P, e2 - 54);
      if (ldexp(1.0, e2 - 1) == a) thr /= 2; /* a power of two */
      p = fmt_decimal(tmp + sizeof tmp, (unsigned long long)mi, k, d < 0);
      if (diff < thr * 0.999 ||
          (diff < thr * 1.001 && strtod(p, NULL) == d)) {
        /* Trailing zeros add nothing (the 15-digit search can miss a
         * shorter form when a * 10^k was rounded). */
        char *end = p + strlen(p) - 1;
        while (*end == '0' && end[-1] != '.') *end-- = '\0';
        ENC_OK(e, ludo__buf_adds(e->b, p));
        return 1;
      }
    }
  }
  return 0;
}

/* Shortest text that reads back as the same double, always with a '.' or
 * an exponent so it reads back as a float. */
static void enc_float(enc_t *e, double d) {
  char tmp[40];
  int prec;
  if (!isfinite(d)) {
    ENC_OK(e, ludo__buf_add(e->b, "null", 4));
    return;
  }
  if (d > -1e15 && d < 1e15 && d == (double)(long long)d) {
    /* Integral values: "3.0" without a round trip through strtod. */
    if (d == 0 && signbit(d))
      ENC_OK(e, ludo__buf_add(e->b, "-0.0", 4));
    else
      enc_integer(e, (long long)d, ".0");
    return;
  }
  if (enc_short_decimal(e, d)) return;
  /* Out of its range (rare): the shortest of %.1g ... %.17g. */
  for (prec = 1; prec < 17; prec++) {
    snprintf(tmp, sizeof tmp, "%.*g", prec, d);
    if (strtod(tmp, NULL) == d) break;
  }
  if (prec == 17) snprintf(tmp, sizeof tmp, "%.17g", d);
  if (strpbrk(tmp, ".eEn") == NULL) strcat(tmp, ".0");
  ENC_OK(e, ludo__buf_adds(e->b, tmp));
}

static void enc_value(enc_t *e, int idx, int depth);


typedef struct {
  const char *s;
  size_t n;
  int slot; /* stack index of the key */
} key_t_;

static int key_cmp(const void *a, const void *b) {
  const key_t_ *x = a, *y = b;
  size_t n = x->n < y->n ? x->n : y->n;
  int c = memcmp(x->s, y->s, n);
  if (c != 0) return c;
  return x->n < y->n ? -1 : x->n > y->n;
}

static int is_skipped(const char *const *skip, const char *k, size_t n) {
  for (; skip && *skip; skip++)
    if ((*skip)[0] == k[0] && strncmp(*skip, k, n) == 0 && (*skip)[n] == 0)
      return 1;
  return 0;
}

/* Writes the "key":value pairs of the object at t (keys sorted, `skip`
 * left out), without braces. `nstr` is the number of string keys. Returns
 * how many pairs were written. */
static size_t enc_fields(enc_t *e, int t, int depth, const char *const *skip,
                         size_t nstr) {
  lua_State *L = e->L;
  size_t i, nk = 0;
  int top = lua_gettop(L), base;
  key_t_ small[16];
  key_t_ *keys = small;
  luaL_checkstack(L, (int)nstr + 4, "JSON object too large");
  if (nstr > 16) keys = lua_newuserdatauv(L, nstr * sizeof *keys, 0);
  base = lua_gettop(L);
  lua_pushnil(L);
  while (lua_next(L, t)) {
    lua_pop(L, 1);
    lua_pushvalue(L, -1); /* the copy below stays; the top drives next */
  }
  for (i = 0; i < nstr; i++) {
    keys[nk].slot = base + 1 + (int)i;
    keys[nk].s = lua_tolstring(L, keys[nk].slot, &keys[nk].n);
    if (!is_skipped(skip, keys[nk].s, keys[nk].n)) nk++;
  }
  if (nk > 1) qsort(keys, nk, sizeof *keys, key_cmp);
  for (i = 0; i < nk; i++) {
    path_elem_t *pe = &e->path.elems[e->path.n++];
    pe->key = keys[i].s;
    pe->klen = keys[i].n;
    if (i > 0) ENC_OK(e, ludo__buf_addc(e->b, ','));
    enc_string(e, keys[i].s, keys[i].n);
    ENC_OK(e, ludo__buf_addc(e->b, ':'));
    lua_pushvalue(L, keys[i].slot);
    lua_rawget(L, t);
    enc_value(e, lua_gettop(L), depth + 1);
    lua_pop(L, 1);
    e->path.n--;
  }
  lua_settop(L, top);
  return nk;
}

/* Encodes the table at absolute index `t`. */
static void enc_table(enc_t *e, int t, int depth, const char *const *skip) {
  lua_State *L = e->L;
  lua_Integer nint = 0, maxint = 0;
  size_t nstr = 0, i;
  int is_arr;
  if (depth >= e->maxdepth) {
    char what[64];
    snprintf(what, sizeof what, "nesting deeper than %d (a cycle?)",
             e->maxdepth);
    enc_fail(e, what);
  }
  /* Arrays by metatable. */
  is_arr = 0;
  if (lua_getmetatable(L, t)) {
    lua_rawgetp(L, LUA_REGISTRYINDEX, &array_key);
    is_arr = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
  }
  /* Count keys by kind. */
  luaL_checkstack(L, 4, "JSON nesting");
  lua_pushnil(L);
  while (lua_next(L, t)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) == LUA_TSTRING) {
      nstr++;
    } else if (lua_isinteger(L, -1) && lua_tointeger(L, -1) >= 1) {
      lua_Integer k = lua_tointeger(L, -1);
      nint++;
      if (k > maxint) maxint = k;
    } else {
      const char *tn = luaL_typename(L, -1);
      lua_pop(L, 1);
      lua_pushfstring(L, "table key of type %s (keys must be strings, or "
                         "1..n for arrays)", tn);
      enc_fail(e, lua_tostring(L, -1));
    }
  }
  if (nstr > 0 && nint > 0) enc_fail(e, "table mixes array items and keys");
  if (is_arr && nstr > 0) enc_fail(e, "array has string keys");
  if (nint > 0 || (is_arr && nstr == 0)) {
    if (maxint != nint) enc_fail(e, "sparse array (holes between 1 and n)");
    ENC_OK(e, ludo__buf_addc(e->b, '['));
    for (i = 1; i <= (size_t)nint; i++) {
      path_elem_t *pe = &e->path.elems[e->path.n++];
      pe->key = NULL;
      pe->index = (lua_Integer)i - 1;
      if (i > 1) ENC_OK(e, ludo__buf_addc(e->b, ','));
      lua_rawgeti(L, t, (lua_Integer)i);
      enc_value(e, lua_gettop(L), depth + 1);
      lua_pop(L, 1);
      e->path.n--;
    }
    ENC_OK(e, ludo__buf_addc(e->b, ']'));
    return;
  }
  ENC_OK(e, ludo__buf_addc(e->b, '{'));
  enc_fields(e, t, depth, skip, nstr);
  ENC_OK(e, ludo__buf_addc(e->b, '}'));
}

static void enc_value(enc_t *e, int idx, int depth) {
  lua_State *L = e->L;
  switch (lua_type(L, idx)) {
    case LUA_TNIL:
      ENC_OK(e, ludo__buf_add(e->b, "null", 4));
      break;
    case LUA_TBOOLEAN:
      if (lua_toboolean(L, idx))
        ENC_OK(e, ludo__buf_add(e->b, "true", 4));
      else
        ENC_OK(e, ludo__buf_add(e->b, "false", 5));
      break;
    case LUA_TNUMBER:
      if (lua_isinteger(L, idx)) {
        enc_integer(e, (long long)lua_tointeger(L, idx), NULL);
      } else {
        enc_float(e, (double)lua_tonumber(L, idx));
      }
      break;
    case LUA_TSTRING: {
      size_t n;
      const char *s = lua_tolstring(L, idx, &n);
      enc_string(e, s, n);
      break;
    }
    case LUA_TTABLE: {
      int isnull;
      lua_rawgetp(L, LUA_REGISTRYINDEX, &null_key);
      isnull = lua_rawequal(L, -1, idx);
      lua_pop(L, 1);
      if (isnull)
        ENC_OK(e, ludo__buf_add(e->b, "null", 4));
      else
        enc_table(e, lua_absindex(L, idx), depth, NULL);
      break;
    }
    default: {
      char what[64];
      snprintf(what, sizeof what, "cannot encode a %s",
               luaL_typename(L, idx));
      enc_fail(e, what);
    }
  }
}

static void enc_init(enc_t *e, lua_State *L, ludo__buf_t *b, int maxdepth) {
  if (maxdepth <= 0 || maxdepth > LUDO__JSON_MAXDEPTH)
    maxdepth = LUDO__JSON_MAXDEPTH;
  e->L = L;
  e->b = b;
  e->maxdepth = maxdepth;
  e->path.n = 0;
}

void ludo__json_encode(lua_State *L, int idx, ludo__buf_t *b, int maxdepth,
                       const char *const *skip) {
  enc_t e;
  enc_init(&e, L, b, maxdepth);
  idx = lua_absindex(L, idx);
  if (skip != NULL && lua_type(L, idx) == LUA_TTABLE)
    enc_table(&e, idx, 0, skip);
  else
    enc_value(&e, idx, 0);
}

size_t ludo__json_encode_fields(lua_State *L, int idx, ludo__buf_t *b,
                                int maxdepth, const char *const *skip) {
  enc_t e;
  size_t nstr = 0;
  enc_init(&e, L, b, maxdepth);
  idx = lua_absindex(L, idx);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING) {
      lua_pop(L, 1);
      enc_fail(&e, "object has a key that is not a string");
    }
    nstr++;
  }
  return enc_fields(&e, idx, 0, skip, nstr);
}

/* ---- the Lua module -------------------------------------------------- */

typedef struct {
  ludo__buf_t b;
} buf_box_t;

static int buf_box_gc(lua_State *L) {
  buf_box_t *box = lua_touserdata(L, 1);
  ludo__buf_free(&box->b);
  return 0;
}

/* Pushes a userdata holding an empty buffer on the state's allocator,
 * freed by __gc if an error leaves it behind. [-0, +1, m] */
static buf_box_t *new_buf_box(lua_State *L) {
  buf_box_t *box;
  void *ud;
  lua_Alloc fn = lua_getallocf(L, &ud);
  box = lua_newuserdatauv(L, sizeof *box, 0);
  ludo__buf_init(&box->b, fn, ud);
  if (luaL_newmetatable(L, "ludo.json.buf")) {
    lua_pushcfunction(L, buf_box_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  return box;
}

void ludo__json_tostring(lua_State *L, int idx, int maxdepth) {
  buf_box_t *box;
  idx = lua_absindex(L, idx);
  box = new_buf_box(L);
  ludo__json_encode(L, idx, &box->b, maxdepth, NULL);
  lua_pushlstring(L, box->b.p ? box->b.p : "", box->b.len);
  ludo__buf_free(&box->b);
  lua_remove(L, -2);
}

/* ludo.json.encode(value [, maxdepth]) -> string | nil, err, code */
static int ludo_l_json_encode(lua_State *L) {
  int maxdepth = (int)luaL_optinteger(L, 2, LUDO__JSON_MAXDEPTH);
  buf_box_t *box;
  luaL_checkany(L, 1);
  lua_settop(L, 1);
  box = new_buf_box(L);
  /* Run the encoder protected so a bad value gives nil, err. */
  {
    lua_State *T = L;
    int status;
    lua_pushvalue(T, lua_upvalueindex(1)); /* encode_protected */
    lua_pushvalue(T, 1);
    lua_pushlightuserdata(T, &box->b);
    lua_pushinteger(T, maxdepth);
    status = lua_pcall(T, 3, 0, 0);
    if (status != LUA_OK) {
      if (status == LUA_ERRMEM) lua_error(T);
      luaL_pushfail(T);
      lua_insert(T, -2);
      lua_pushstring(T, "EVALUE");
      {
        const char *m = lua_tostring(T, -2);
        if (m && strncmp(m, "ENOMEM", 6) == 0) {
          lua_pop(T, 1);
          lua_pushliteral(T, "ENOMEM");
        }
      }
      return 3;
    }
  }
  lua_pushlstring(L, box->b.p ? box->b.p : "", box->b.len);
  ludo__buf_free(&box->b);
  return 1;
}

static int encode_protected(lua_State *L) {
  ludo__buf_t *b = lua_touserdata(L, 2);
  int maxdepth = (int)lua_tointeger(L, 3);
  ludo__json_encode(L, 1, b, maxdepth, NULL);
  return 0;
}

static int decode_protected(lua_State *L) {
  size_t n;
  const char *s = lua_tolstring(L, 1, &n);
  ludo__json_decode(L, s, n, (int)lua_tointeger(L, 2));
  return 1;
}

/* ludo.json.decode(text [, maxdepth]) -> value | nil, err, code */
static int ludo_l_json_decode(lua_State *L) {
  int status;
  luaL_checkstring(L, 1);
  lua_settop(L, 2);
  lua_pushinteger(L, luaL_optinteger(L, 2, LUDO__JSON_MAXDEPTH));
  lua_replace(L, 2);
  lua_pushcfunction(L, decode_protected);
  lua_insert(L, 1);
  status = lua_pcall(L, 2, 1, 0);
  if (status == LUA_OK) return 1;
  if (status == LUA_ERRMEM) lua_error(L);
  luaL_pushfail(L);
  lua_insert(L, -2);
  lua_pushliteral(L, "EPARSE");
  return 3;
}

/* ludo.json.array([t]) -> t marked as a JSON array */
static int ludo_l_json_array(lua_State *L) {
  if (lua_isnoneornil(L, 1)) {
    lua_settop(L, 0);
    lua_newtable(L);
  }
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &array_key);
  lua_setmetatable(L, 1);
  return 1;
}

/* ludo.json.is_array(v) -> boolean */
static int ludo_l_json_is_array(lua_State *L) {
  int r = 0;
  if (lua_type(L, 1) == LUA_TTABLE && lua_getmetatable(L, 1)) {
    lua_rawgetp(L, LUA_REGISTRYINDEX, &array_key);
    r = lua_rawequal(L, -1, -2);
  }
  lua_pushboolean(L, r);
  return 1;
}

LUDO_EXTERN int luaopen_ludo_json(lua_State *L) {
  ludo__json_setup(L);
  lua_createtable(L, 0, 6);
  lua_pushcfunction(L, encode_protected);
  lua_pushcclosure(L, ludo_l_json_encode, 1);
  lua_setfield(L, -2, "encode");
  lua_pushcfunction(L, ludo_l_json_decode);
  lua_setfield(L, -2, "decode");
  lua_pushcfunction(L, ludo_l_json_array);
  lua_setfield(L, -2, "array");
  lua_pushcfunction(L, ludo_l_json_is_array);
  lua_setfield(L, -2, "is_array");
  ludo__json_pushnull(L);
  lua_setfield(L, -2, "null");
  lua_rawgetp(L, LUA_REGISTRYINDEX, &array_key);
  lua_setfield(L, -2, "array_mt");
  return 1;
}
