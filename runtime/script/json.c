/* json.c - JSON <-> Lua values (see json.h). */
#include "script/json.h"

#include <lauxlib.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"
#include "base/jsonparse.h"
#include "base/utf8.h"
#include "core/error.h"
#include "script/tablewalk.h"

static const char null_key = 'n';  /* registry: the null sentinel */
static const char array_key = 'a'; /* registry: the array metatable */
static const char box_key = 'b';   /* registry: the decode scratch */

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
    /* Shared by every array of the state: Lua sees only this name, never
     * the table, so no script can plant fields (a __gc) in it. */
    lua_pushliteral(L, "ludo.json.array");
    lua_setfield(L, -2, "__metatable");
    lua_rawsetp(L, LUA_REGISTRYINDEX, &array_key);
  } else {
    lua_pop(L, 1);
  }
}

/* ludo.null in session states: a userdata, so not even rawset can change
 * it; its metatable is hidden. Stock Lua gets lua/ludo/null.lua's table,
 * and `v == null` works the same with both. */
static int null_tostring(lua_State *L) {
  lua_pushliteral(L, "ludo.null");
  return 1;
}

int ludo__json_open_null(lua_State *L) {
  lua_newuserdatauv(L, 0, 0);
  lua_createtable(L, 0, 3);
  lua_pushliteral(L, "ludo.null");
  lua_setfield(L, -2, "__name");
  lua_pushcfunction(L, null_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pushliteral(L, "ludo.null");
  lua_setfield(L, -2, "__metatable");
  lua_setmetatable(L, -2);
  return 1;
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

/* ---- the CPU check --------------------------------------------------- */

/* Decoding checks at the parser's ticks. */
_Static_assert(LUDO__JSON_CHECK_EVERY == LUDO__JSONPARSE_TICK,
               "the decode check interval is the parser's tick");

static ludo__json_check_fn check_fn, stopped_fn;
static ludo__json_cap_fn cap_fn;

void ludo__json_set_cap(ludo__json_cap_fn fn) { cap_fn = fn; }

void ludo__json_set_check(ludo__json_check_fn fn, ludo__json_check_fn stopped) {
  check_fn = fn;
  stopped_fn = stopped;
}

/* Calls the check hook and raises the error it left when it says stop;
 * `*stop` (when not NULL) is set first, so a protected caller can tell the
 * hook's error from a bad value. [-0, +0, e] */
static void run_check(lua_State *L, int *stop) {
  if (check_fn != NULL && check_fn(L) != 0) {
    if (stop != NULL) *stop = 1;
    lua_error(L);
  }
}

/* ---- decoding -------------------------------------------------------- */

/* Scratch memory for unescaping is a plain userdata kept in the registry
 * (on the state's allocator, so the memory cap counts it, and collected
 * like any value if an error leaves it behind). Larger ones are dropped at
 * the end of a decode. */
#define SCRATCH_KEEP 4096

/* A container's values are first kept on the stack above its base, and
 * its table is made when it ends, at its final size (no rehash while it
 * grows). Past DEC_BATCH values the table is made, with room for twice as
 * many, and later values go straight into it. */
#define DEC_BATCH 16

/* One open array or object. */
typedef struct {
  int base;       /* stack index of the table, or of the first value held */
  int has_table;  /* the table exists (at base) */
  int spread;     /* the top-level array of ludo__json_decode_args: its
                     values stay on the stack, no table is made */
  int is_obj;
  int held;       /* values (objects: key-value pairs) held on the stack */
  int key_slot;   /* an object's current key */
  lua_Integer n;  /* values so far */
} frame_t;

typedef struct {
  lua_State *L;
  int depth, maxdepth;
  int spread;            /* ludo__json_decode_args: -1 asked, else the
                            count of the spread array's values */
  int *stop;             /* set when the check hook raises */
  char *scratch;         /* the registry's scratch userdata */
  size_t scratch_len;
  frame_t fr[LUDO__JSON_MAXDEPTH];
} dec_t;

/* Makes the table of f with room for `size` values, moves the values held
 * into it and leaves it at f->base. The table is made on top and rotated
 * down to f->base, above which the values stay: an array's are then set
 * from the top down, each popped by its rawseti (all land in the array
 * part made for them, so the order does not matter); an object's pairs
 * are set in document order (which decides the hash part's layout, so
 * pairs() order, and that the last of a repeated key wins): copies of all
 * but the last, which is on top and popped by its rawset. [-held, +1, m] */
static void dec_make_table(lua_State *L, frame_t *f, int size) {
  int i, held = f->held;
  if (f->is_obj)
    lua_createtable(L, 0, size);
  else
    lua_createtable(L, size, 0);
  if (held > 0) {
    lua_rotate(L, f->base, 1); /* stack: table, values... */
    if (!f->is_obj) {
      for (i = held; i >= 1; i--) lua_rawseti(L, f->base, i);
    } else {
      for (i = 0; i < held - 1; i++) {
        lua_pushvalue(L, f->base + 1 + 2 * i);
        lua_pushvalue(L, f->base + 2 + 2 * i);
        lua_rawset(L, f->base);
      }
      lua_rawset(L, f->base); /* the last pair, on top */
      if (held > 1) lua_settop(L, f->base);
    }
  }
  f->held = 0;
  f->has_table = 1;
}

static void dec_push_path(dec_t *d);
static void raise_code(lua_State *L, int code);

/* Before the value that makes f's table double its storage (n = 2^k + 1,
 * from 2^16 on): refuses with ENOMEM when the old and the new storage (and
 * for an object, a string header per key) cannot fit in the state's memory
 * cap together. A lower bound of what the table needs (Lua 5.4 on 64 bits:
 * 24-byte nodes, 16-byte array slots, 24-byte string headers), so nothing
 * that fits is refused. [-0, +0, v] */
static void dec_check_growth(dec_t *d, const frame_t *f) {
  lua_Integer k = f->n - 1; /* the storage it fills: a power of two */
  size_t cap, need;
  if (cap_fn == NULL || k < 65536 || (k & (k - 1)) != 0) return;
  cap = cap_fn(d->L);
  need = f->is_obj ? (size_t)k * (24 + 48 + 24) : (size_t)k * (16 + 32);
  if (cap == 0 || need <= cap) return;
  dec_push_path(d);
  lua_pushfstring(d->L, "at %s: the %s grows past %I %s, which the memory "
                  "limit of %I bytes cannot hold", lua_tostring(d->L, -1),
                  f->is_obj ? "object" : "array", k,
                  f->is_obj ? "members" : "items", (lua_Integer)cap);
  raise_code(d->L, LUDO_ENOMEM);
}

static void need_stack(lua_State *L, int n);

/* Gives the value on top (and an object's key below it) to the innermost
 * container, if any. [-(0|1|2), +(0|1), m] */
static void dec_place(dec_t *d) {
  frame_t *f;
  if (d->depth == 0) return;
  f = &d->fr[d->depth - 1];
  f->n++;
  if (f->spread) { /* room for the next batch, as dec_begin makes it */
    if (++f->held % DEC_BATCH == 0) need_stack(d->L, 2 * DEC_BATCH + 4);
    return;
  }
  if (f->has_table) dec_check_growth(d, f);
  if (!f->has_table) {
    if (++f->held == DEC_BATCH) dec_make_table(d->L, f, 2 * DEC_BATCH);
  } else if (f->is_obj) {
    lua_rawset(d->L, f->base);
  } else {
    lua_rawseti(d->L, f->base, f->n);
  }
}

/* The parser's callbacks (base/jsonparse.h). Each scalar is pushed and
 * given to the innermost container; they raise on memory errors instead
 * of returning nonzero. [-0, +(0|1), m] */

static int dec_null(void *ud) {
  dec_t *d = ud;
  lua_rawgetp(d->L, LUA_REGISTRYINDEX, &null_key);
  dec_place(d);
  return 0;
}

static int dec_boolean(void *ud, int v) {
  dec_t *d = ud;
  lua_pushboolean(d->L, v);
  dec_place(d);
  return 0;
}

static int dec_integer(void *ud, int64_t v) {
  dec_t *d = ud;
  lua_pushinteger(d->L, (lua_Integer)v);
  dec_place(d);
  return 0;
}

static int dec_real(void *ud, double v) {
  dec_t *d = ud;
  lua_pushnumber(d->L, (lua_Number)v);
  dec_place(d);
  return 0;
}

static int dec_string(void *ud, const char *s, size_t n) {
  dec_t *d = ud;
  lua_pushlstring(d->L, s, n);
  dec_place(d);
  return 0;
}

/* Pushes the key; the member's value will sit above it. [-0, +1, m] */
static int dec_key(void *ud, const char *s, size_t n) {
  dec_t *d = ud;
  lua_pushlstring(d->L, s, n);
  d->fr[d->depth - 1].key_slot = lua_gettop(d->L);
  return 0;
}

/* Makes room for n more slots on L's stack, else raises ENOMEM: the
 * nesting is bounded (LUDO__JSON_MAXDEPTH), so the stack cannot grow only
 * when the state's memory is at its cap, or when the caller's Lua used
 * the stack's own limit (1,000,000 slots, itself memory). It raised a
 * plain "stack overflow", which a decode reported as EPARSE: bad JSON,
 * for what was a full session. `what` names what needed the room.
 * [-0, +0, v] */
static void need_stack_for(lua_State *L, int n, const char *what) {
  if (lua_checkstack(L, n)) return;
  lua_pushfstring(L, "no room to grow the Lua stack for %s (the session's "
                     "memory limit, or Lua's stack limit)", what);
  raise_code(L, LUDO_ENOMEM);
}

static void need_stack(lua_State *L, int n) {
  need_stack_for(L, n, "the JSON nesting");
}

/* Opens a container: its values gather above the current top.
 * [-0, +0, m] */
static int dec_begin(dec_t *d, int is_obj) {
  frame_t *f = &d->fr[d->depth++];
  need_stack(d->L, 2 * DEC_BATCH + 4);
  f->base = lua_gettop(d->L) + 1;
  f->has_table = 0;
  f->spread = d->spread == -1 && d->depth == 1 && !is_obj;
  f->is_obj = is_obj;
  f->held = 0;
  f->n = 0;
  return 0;
}

/* Closes the innermost container, leaving its table on top. [-k, +1, m] */
static void dec_end(dec_t *d) {
  frame_t *f = &d->fr[d->depth - 1];
  if (!f->has_table) dec_make_table(d->L, f, f->held);
  d->depth--;
}

static int dec_begin_object(void *ud) {
  return dec_begin(ud, 1);
}

static int dec_begin_array(void *ud) {
  return dec_begin(ud, 0);
}

static int dec_end_object(void *ud) {
  dec_t *d = ud;
  dec_end(d);
  dec_place(d);
  return 0;
}

static int dec_end_array(void *ud) {
  dec_t *d = ud;
  if (d->fr[d->depth - 1].spread) {
    d->spread = (int)d->fr[--d->depth].n;
    return 0;
  }
  dec_end(d);
  lua_rawgetp(d->L, LUA_REGISTRYINDEX, &array_key);
  lua_setmetatable(d->L, -2);
  dec_place(d);
  return 0;
}

/* Lends at least n bytes: the registry's scratch userdata, replaced by a
 * bigger one when too small. [-0, +0, m] */
static char *dec_scratch(void *ud, size_t n) {
  dec_t *d = ud;
  lua_State *L = d->L;
  size_t old = 0;
  if (n <= d->scratch_len) return d->scratch;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &box_key) == LUA_TUSERDATA) {
    old = lua_rawlen(L, -1);
    if (old >= n) {
      d->scratch = lua_touserdata(L, -1);
      d->scratch_len = old;
      lua_pop(L, 1);
      return d->scratch;
    }
  }
  lua_pop(L, 1);
  if (n < old * 2) n = old * 2;
  if (n < 256) n = 256;
  d->scratch = lua_newuserdatauv(L, n, 0);
  d->scratch_len = n;
  lua_rawsetp(L, LUA_REGISTRYINDEX, &box_key);
  return d->scratch;
}

static int dec_tick(void *ud, size_t offset) {
  dec_t *d = ud;
  (void)offset;
  run_check(d->L, d->stop);
  return 0;
}

static const ludo__jsonparse_cb_t dec_cb = {
    dec_null,         dec_boolean,     dec_integer,      dec_real,
    dec_string,       dec_key,         dec_begin_object, dec_end_object,
    dec_begin_array,  dec_end_array,   dec_scratch,      dec_tick,
    NULL,             NULL};

/* Pushes "$.a[2].b", the path of the container being opened. [-0, +1, m] */
static void dec_push_path(dec_t *d) {
  path_t p;
  int i;
  p.n = 0;
  for (i = 0; i < d->depth; i++) {
    path_elem_t *pe = &p.elems[p.n++];
    if (d->fr[i].is_obj) {
      pe->key = lua_tolstring(d->L, d->fr[i].key_slot, &pe->klen);
    } else {
      pe->key = NULL;
      pe->index = d->fr[i].n;
    }
  }
  push_path(d->L, &p);
}

/* Raises the text on top as a ludo error object with `code` (no
 * location: these errors are about data, not code). [-1, +0, v] */
static void raise_code(lua_State *L, int code) {
  size_t len;
  const char *text = lua_tolstring(L, -1, &len);
  ludo__error_push(L, code, text, len, 0);
  lua_error(L);
}

/* Raises the parse error `e`. [-0, +0, v] */
static void dec_fail(dec_t *d, const ludo__jsonparse_err_t *e) {
  lua_State *L = d->L;
  if (e->kind == LUDO__JSONPARSE_EDEPTH) {
    dec_push_path(d);
    lua_pushfstring(L, "nesting deeper than %d at %s", d->maxdepth,
                    lua_tostring(L, -1));
  } else {
    lua_pushfstring(L, "%s at line %I column %I (byte %I)", e->msg,
                    (lua_Integer)e->line, (lua_Integer)e->column,
                    (lua_Integer)e->offset);
  }
  raise_code(L, LUDO_EPARSE);
}

/* Decodes like ludo__json_decode; `stop` as in run_check. With `spread`,
 * a top-level array's values are pushed instead of the array, and their
 * number returned; a top-level value of another kind is pushed and -1
 * returned. [-0, +(1|n), e] */
static int decode_text(lua_State *L, const char *s, size_t len, int maxdepth,
                       int *stop, int spread) {
  ludo__jsonparse_err_t err;
  dec_t d;
  if (maxdepth <= 0 || maxdepth > LUDO__JSON_MAXDEPTH)
    maxdepth = LUDO__JSON_MAXDEPTH;
  if (len == 0) {
    lua_pushliteral(L, "empty input (expected a JSON value)");
    raise_code(L, LUDO_EPARSE);
  }
  d.L = L;
  d.depth = 0;
  d.maxdepth = maxdepth;
  d.spread = spread ? -1 : 0;
  d.stop = stop;
  d.scratch = NULL;
  d.scratch_len = 0;
  if (ludo__jsonparse_run(s, len, maxdepth, &dec_cb, &d, &err) != 0)
    dec_fail(&d, &err);
  if (d.scratch_len > SCRATCH_KEEP) {
    lua_pushnil(L);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &box_key);
  }
  return d.spread;
}

void ludo__json_decode(lua_State *L, const char *s, size_t len,
                       int maxdepth) {
  decode_text(L, s, len, maxdepth, NULL, 0);
}

int ludo__json_decode_args(lua_State *L, const char *s, size_t len,
                           int maxdepth) {
  return decode_text(L, s, len, maxdepth, NULL, 1);
}

/* ---- encoding -------------------------------------------------------- */

typedef struct {
  lua_State *L;
  ludo__buf_t *b;
  int maxdepth;
  size_t check_at; /* output length at which the check hook runs next */
  int *stop;       /* as in run_check */
  path_t path;
} enc_t;

static void enc_fail(enc_t *e, const char *what) {
  lua_State *L = e->L;
  push_path(L, &e->path);
  lua_pushfstring(L, "%s at %s", what, lua_tostring(L, -1));
  raise_code(L, LUDO_EVALUE);
}

static void enc_nomem(enc_t *e) { ludo__json_nomem(e->L); }

#define ENC_OK(e, x) \
  do {               \
    if ((x) != 0) enc_nomem(e); \
  } while (0)

/* Appends one byte (ludo__buf_addc without the call; inline: GCC kept it
 * out of line, a call for each brace, comma and colon). */
static inline void enc_char(enc_t *e, char c) {
  ludo__buf_t *b = e->b;
  if (b->len + 2 > b->cap && ludo__buf_reserve(b, 1) != 0) enc_nomem(e);
  b->p[b->len++] = c;
  b->p[b->len] = '\0';
}

/* 1 when none of the 8 bytes in w needs a look: below 0x20, '"', '\\'
 * or 0x80 and above (the "has a byte less than / equal to" tricks, exact
 * for whether any byte matches). */
static int plain8(uint64_t w) {
  const uint64_t ones = 0x0101010101010101ull, high = ones << 7;
  uint64_t q = w ^ (ones * '"'), bs = w ^ (ones * '\\');
  return ((w | ((w - ones * 0x20) & ~w) | ((q - ones) & ~q) |
           ((bs - ones) & ~bs)) & high) == 0;
}

/* The n < 8 bytes at s in one word, the rest spaces (which need no
 * look): two overlapping loads for 4 to 7 bytes, the first, middle and
 * last byte for 1 to 3, so every byte is in the word and no byte past s + n
 * is read. */
static uint64_t tail8(const char *s, size_t n) {
  const uint64_t spaces = 0x0101010101010101ull * ' ';
  uint32_t lo, hi;
  if (n >= 4) {
    memcpy(&lo, s, 4);
    memcpy(&hi, s + n - 4, 4);
    return (uint64_t)lo | (uint64_t)hi << 32;
  }
  if (n == 0) return spaces;
  return (spaces << 24) | (uint64_t)(unsigned char)s[0] |
         (uint64_t)(unsigned char)s[n / 2] << 8 |
         (uint64_t)(unsigned char)s[n - 1] << 16;
}

/* 1 when s is printable ASCII with nothing to escape: most keys and
 * values, written with one copy. Looks at 8 bytes at a time, the last
 * word through tail8 (no loop over bytes). */
static int is_plain(const char *s, size_t n) {
  size_t i = 0;
  uint64_t w;
  for (; n - i >= 8; i += 8) {
    memcpy(&w, s + i, 8);
    if (!plain8(w)) return 0;
  }
  return plain8(tail8(s + i, n - i));
}

static void enc_string(enc_t *e, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  ludo__buf_t *b = e->b;
  size_t i, start = 0, bad;
  if (is_plain(s, n)) {
    if (b->len + n + 3 > b->cap) ENC_OK(e, ludo__buf_reserve(b, n + 2));
    b->p[b->len] = '"';
    memcpy(b->p + b->len + 1, s, n);
    b->len += n + 2;
    b->p[b->len - 1] = '"';
    b->p[b->len] = '\0';
    return;
  }
  bad = ludo__utf8_check(s, n);
  if (bad < n) {
    char what[64];
    snprintf(what, sizeof what, "invalid UTF-8 in string (byte %zu)", bad);
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
  enc_char(e, '"');
}

/* Bytes a number's text may take (float_text), with its NUL. */
#define NUM_TEXT 48

/* Writes the decimal digits of v (with a '-') ending just before `end`;
 * returns the start (faster than snprintf on the hot path). */
static char *int_text(char *end, long long v) {
  char *p = end;
  unsigned long long u = v < 0 ? 0ull - (unsigned long long)v
                               : (unsigned long long)v;
  do {
    *--p = (char)('0' + u % 10);
    u /= 10;
  } while (u != 0);
  if (v < 0) *--p = '-';
  return p;
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
 * near that border strtod decides. Writes the text, NUL-terminated, into
 * tmp (NUM_TEXT bytes) and returns its start, setting *len; returns NULL
 * when d is out of range. */
static char *short_decimal(char *tmp, double d, size_t *len) {
  double a = fabs(d), m;
  char *p, *end = tmp + NUM_TEXT;
  int k, lo, hi, e2;
  if (!(a >= 1e-6 && a < 1e15)) return NULL;
  /* Scores and rewards are mostly a few decimals (0.7, 0.25): try those
   * first, smallest k first, before the bisection (a * 10^k < 2^53 keeps
   * decimal_is exact). */
  for (k = 1; k <= 3 && a * p10[k] < 9007199254740992.0; k++)
    if (decimal_is(a, k, &m)) {
      p = fmt_decimal(end, (unsigned long long)m, k, d < 0);
      *len = (size_t)(end - 1 - p);
      return p;
    }
  /* The most decimals with every intermediate exact: a * 10^k < 2^53. */
  for (hi = 22; hi > 1 && a * p10[hi] >= 9007199254740992.0; hi--) {}
  if (hi >= k && decimal_is(a, hi, &m)) {
    lo = k;
    while (lo < hi) {
      int mid = (lo + hi) / 2;
      double mm;
      if (decimal_is(a, mid, &mm))
        hi = mid;
      else
        lo = mid + 1;
    }
    decimal_is(a, hi, &m);
    p = fmt_decimal(end, (unsigned long long)m, hi, d < 0);
    *len = (size_t)(end - 1 - p);
    return p;
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
      if (ph >= 9.0e18) return NULL;
      fl = floor(ph);
      frac = (ph - fl) + pl;
      mi = (long long)fl + (long long)floor(frac + 0.5);
      diff = fabs((double)(mi - (long long)fl) - frac); /* |m - a*P| */
      /* Half the smaller gap between a and its neighbours, times P. */
      thr = ldexp(P, e2 - 54);
      if (ldexp(1.0, e2 - 1) == a) thr /= 2; /* a power of two */
      p = fmt_decimal(end, (unsigned long long)mi, k, d < 0);
      if (diff < thr * 0.999 ||
          (diff < thr * 1.001 && strtod(p, NULL) == d)) {
        /* Trailing zeros add nothing (the 15-digit search can miss a
         * shorter form when a * 10^k was rounded). */
        char *last = p + strlen(p) - 1;
        while (*last == '0' && last[-1] != '.') *last-- = '\0';
        *len = (size_t)(last + 1 - p);
        return p;
      }
    }
  }
  return NULL;
}

/* Shortest text that reads back as the same finite double, always with a
 * '.' or an exponent so it reads back as a float: written into tmp
 * (NUM_TEXT bytes), its start returned and its length set in *len. */
static const char *float_text(char *tmp, double d, size_t *len) {
  char *p;
  int prec;
  if (d > -1e15 && d < 1e15 && d == (double)(long long)d) {
    /* Integral values: "3.0" without a round trip through strtod. */
    if (d == 0 && signbit(d)) {
      *len = 4;
      return "-0.0";
    }
    memcpy(tmp + NUM_TEXT - 2, ".0", 2);
    p = int_text(tmp + NUM_TEXT - 2, (long long)d);
    *len = (size_t)(tmp + NUM_TEXT - p);
    return p;
  }
  if ((p = short_decimal(tmp, d, len)) != NULL) return p;
  /* Out of its range (rare): the shortest of %.1g ... %.17g. */
  for (prec = 1; prec < 17; prec++) {
    snprintf(tmp, NUM_TEXT, "%.*g", prec, d);
    if (strtod(tmp, NULL) == d) break;
  }
  if (prec == 17) snprintf(tmp, NUM_TEXT, "%.17g", d);
  if (strpbrk(tmp, ".eEn") == NULL) strcat(tmp, ".0");
  *len = strlen(tmp);
  return tmp;
}

int ludo__json_add_integer(ludo__buf_t *b, lua_Integer v) {
  char tmp[32], *p = int_text(tmp + sizeof tmp, (long long)v);
  return ludo__buf_add(b, p, (size_t)(tmp + sizeof tmp - p));
}

int ludo__json_add_float(ludo__buf_t *b, lua_Number d) {
  char tmp[NUM_TEXT];
  const char *p;
  size_t n;
  if (!isfinite(d)) return ludo__buf_add(b, "null", 4);
  p = float_text(tmp, (double)d, &n);
  return ludo__buf_add(b, p, n);
}

void ludo__json_nomem(lua_State *L) {
  lua_pushliteral(L, "the JSON text reached the memory limit");
  raise_code(L, LUDO_ENOMEM);
}

static void enc_value(enc_t *e, int idx, int depth);


typedef struct {
  const char *s;
  size_t n;
  int slot; /* stack index of the key; its value is at slot + 1 */
} key_t_;

static int key_cmp(const void *a, const void *b) {
  const key_t_ *x = a, *y = b;
  size_t n = x->n < y->n ? x->n : y->n;
  int c = memcmp(x->s, y->s, n);
  if (c != 0) return c;
  return x->n < y->n ? -1 : x->n > y->n;
}

/* 1 when the key k (n bytes, which may hold NULs) is one of `skip`. */
static int is_skipped(const char *const *skip, const char *k, size_t n) {
  for (; skip && *skip; skip++)
    if ((*skip)[0] == k[0] && strlen(*skip) == n && memcmp(*skip, k, n) == 0)
      return 1;
  return 0;
}

/* Writes the n "key":value pairs that lie on the stack above `base` (k1,
 * v1, k2, v2, ...; every key a string) with the keys sorted and `skip`
 * left out, without braces, and pops them. The stack has room for one
 * more value (the key list of a large object). Returns how many pairs
 * were written. */
static size_t write_fields(enc_t *e, int base, size_t n, int depth,
                           const char *const *skip) {
  lua_State *L = e->L;
  size_t i, nk = 0;
  key_t_ small[16];
  key_t_ *keys = small;
  if (n > 16) keys = lua_newuserdatauv(L, n * sizeof *keys, 0);
  for (i = 0; i < n; i++) {
    keys[nk].slot = base + 1 + 2 * (int)i;
    keys[nk].s = lua_tolstring(L, keys[nk].slot, &keys[nk].n);
    if (!is_skipped(skip, keys[nk].s, keys[nk].n)) nk++;
  }
  if (nk > 8) {
    qsort(keys, nk, sizeof *keys, key_cmp);
  } else { /* a few keys, the common case: insertion sort, no calls */
    for (i = 1; i < nk; i++) {
      key_t_ k = keys[i];
      size_t j = i;
      for (; j > 0 && key_cmp(&keys[j - 1], &k) > 0; j--) keys[j] = keys[j - 1];
      keys[j] = k;
    }
  }
  for (i = 0; i < nk; i++) {
    path_elem_t *pe = &e->path.elems[e->path.n++];
    pe->key = keys[i].s;
    pe->klen = keys[i].n;
    if (i > 0) enc_char(e, ',');
    enc_string(e, keys[i].s, keys[i].n);
    enc_char(e, ':');
    enc_value(e, keys[i].slot + 1, depth + 1);
    e->path.n--;
  }
  lua_settop(L, base);
  return nk;
}

/* Writes the "key":value pairs of the object at t (keys sorted, `skip`
 * left out), without braces, after a first pass that could not keep its
 * pairs (keep_pairs). `nstr` is the number of string keys. Returns how
 * many pairs were written. */
static size_t enc_fields(enc_t *e, int t, int depth, const char *const *skip,
                         size_t nstr) {
  lua_State *L = e->L;
  int base = lua_gettop(L);
  unsigned int pos = 0;
  if (nstr > LUDO__JSON_MAXKEYS) {
    char what[96];
    snprintf(what, sizeof what, "cannot encode an object of %zu keys (at "
             "most %d)", nstr, LUDO__JSON_MAXKEYS);
    enc_fail(e, what);
  }
  if (!lua_checkstack(L, 2 * (int)nstr + 4)) { /* memory's doing */
    char what[64];
    snprintf(what, sizeof what, "an object of %zu keys", nstr);
    need_stack_for(L, 2 * (int)nstr + 4, what);
  }
  /* stack: ..., k1, v1, k2, v2, ... (a copy of the key drives next) */
  lua_pushnil(L);
  while (ludo__walk_next(L, t, &pos)) lua_pushvalue(L, -2);
  return write_fields(e, base, nstr, depth, skip);
}

/* Pairs kept per lua_checkstack while keep_pairs walks a table. */
#define KEEP_BATCH 16

/* Starts the one pass over the pairs of the table at t (lua_next order)
 * that an object of string keys needs: with `keep`, the pairs are kept on
 * the stack above its top, k1, v1, k2, v2, ... (a copy of each key drives
 * the walk), so the object is written from them without a second walk.
 * Returns 1 when the walk went through that way, with *n pairs kept (all
 * keys strings, at most LUDO__JSON_MAXKEYS). Else returns 0 with the stack
 * as it was plus one value: the key the walk stopped at (*pending = 1,
 * its kind not yet looked at, *n the string keys before it), or nil to
 * start the walk (*pending = 0); the caller goes on with ludo__walk_next
 * from *pos. The walk stops keeping at a key that is not a string, past
 * LUDO__JSON_MAXKEYS keys or when the stack cannot grow: the caller's
 * count then names what is wrong, as it did before the pass kept pairs.
 * [-0, +(2n|1), m] */
static int keep_pairs(lua_State *L, int t, int keep, size_t *n,
                      int *pending, unsigned int *pos) {
  int base = lua_gettop(L), room = KEEP_BATCH;
  size_t k = 0;
  *n = 0;
  *pending = 0;
  *pos = 0;
  if (!keep || !lua_checkstack(L, 2 * KEEP_BATCH + 4)) {
    need_stack(L, 4);
    lua_pushnil(L);
    return 0;
  }
  lua_pushnil(L);
  while (ludo__walk_next(L, t, pos)) { /* ..., k1, v1, ..., k, v */
    if (room == 0) {
      if (!lua_checkstack(L, 2 * KEEP_BATCH + 4)) break;
      room = KEEP_BATCH;
    }
    if (k == LUDO__JSON_MAXKEYS || lua_type(L, -2) != LUA_TSTRING) break;
    lua_pushvalue(L, -2);
    k++;
    room--;
  }
  *n = k;
  if (lua_gettop(L) == base + 2 * (int)k) return 1; /* lua_next ended */
  /* Stopped at k, v: keep k alone, to go on from. */
  lua_copy(L, -2, base + 1);
  lua_settop(L, base + 1);
  *pending = 1;
  return 0;
}

/* Counts the key at the top by kind for enc_table: a string, an array
 * index (integer >= 1), or else fails naming its type. [-0, +0, e] */
static void count_key(enc_t *e, size_t *nstr, lua_Integer *nint,
                      lua_Integer *maxint) {
  lua_State *L = e->L;
  if (lua_type(L, -1) == LUA_TSTRING) {
    (*nstr)++;
  } else if (lua_isinteger(L, -1) && lua_tointeger(L, -1) >= 1) {
    lua_Integer k = lua_tointeger(L, -1);
    (*nint)++;
    if (k > *maxint) *maxint = k;
  } else {
    const char *tn = luaL_typename(L, -1);
    lua_pop(L, 1);
    lua_pushfstring(L, "table key of type %s (keys must be strings, or "
                       "1..n for arrays)", tn);
    enc_fail(e, lua_tostring(L, -1));
  }
}

/* Encodes the table at absolute index `t`. */
static void enc_table(enc_t *e, int t, int depth, const char *const *skip) {
  lua_State *L = e->L;
  lua_Integer nint = 0, maxint = 0;
  size_t nstr = 0, i;
  unsigned int pos;
  int is_arr, pending, base;
  if (depth >= e->maxdepth) {
    char what[64];
    snprintf(what, sizeof what, "nesting deeper than %d (a cycle?)",
             e->maxdepth);
    enc_fail(e, what);
  }
  /* A table may cost a walk of its whole size and write two bytes. */
  if (stopped_fn != NULL && stopped_fn(L)) run_check(L, e->stop);
  /* Arrays by metatable. */
  is_arr = 0;
  if (lua_getmetatable(L, t)) {
    lua_rawgetp(L, LUA_REGISTRYINDEX, &array_key);
    is_arr = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
  }
  /* An object of string keys: written from the pairs its one walk kept. */
  base = lua_gettop(L);
  if (keep_pairs(L, t, !is_arr, &nstr, &pending, &pos)) {
    enc_char(e, '{');
    write_fields(e, base, nstr, depth, skip);
    enc_char(e, '}');
    return;
  }
  /* Count keys by kind (the walk goes on from where keep_pairs stopped). */
  if (pending) count_key(e, &nstr, &nint, &maxint);
  while (ludo__walk_next(L, t, &pos)) {
    lua_pop(L, 1);
    count_key(e, &nstr, &nint, &maxint);
  }
  if (nstr > 0 && nint > 0) enc_fail(e, "table mixes array items and keys");
  if (is_arr && nstr > 0) enc_fail(e, "array has string keys");
  if (nint > 0 || (is_arr && nstr == 0)) {
    if (maxint != nint) enc_fail(e, "sparse array (holes between 1 and n)");
    enc_char(e, '[');
    for (i = 1; i <= (size_t)nint; i++) {
      path_elem_t *pe = &e->path.elems[e->path.n++];
      pe->key = NULL;
      pe->index = (lua_Integer)i - 1;
      if (i > 1) enc_char(e, ',');
      lua_rawgeti(L, t, (lua_Integer)i);
      enc_value(e, lua_gettop(L), depth + 1);
      lua_pop(L, 1);
      e->path.n--;
    }
    enc_char(e, ']');
    return;
  }
  enc_char(e, '{');
  enc_fields(e, t, depth, skip, nstr);
  enc_char(e, '}');
}

static void enc_value(enc_t *e, int idx, int depth) {
  lua_State *L = e->L;
  if (e->b->len >= e->check_at) {
    e->check_at = e->b->len + LUDO__JSON_CHECK_EVERY;
    run_check(L, e->stop);
  }
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
        ENC_OK(e, ludo__json_add_integer(e->b, lua_tointeger(L, idx)));
      } else {
        ENC_OK(e, ludo__json_add_float(e->b, lua_tonumber(L, idx)));
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
      int isnull;
      lua_rawgetp(L, LUA_REGISTRYINDEX, &null_key); /* a userdata null */
      isnull = lua_rawequal(L, -1, idx);
      lua_pop(L, 1);
      if (isnull) {
        ENC_OK(e, ludo__buf_add(e->b, "null", 4));
        break;
      }
      snprintf(what, sizeof what, "cannot encode a %s",
               luaL_typename(L, idx));
      enc_fail(e, what);
    }
  }
}

static void enc_init(enc_t *e, lua_State *L, ludo__buf_t *b, int maxdepth,
                     int *stop) {
  if (maxdepth <= 0 || maxdepth > LUDO__JSON_MAXDEPTH)
    maxdepth = LUDO__JSON_MAXDEPTH;
  e->L = L;
  e->b = b;
  e->maxdepth = maxdepth;
  e->check_at = b->len + LUDO__JSON_CHECK_EVERY;
  e->stop = stop;
  e->path.n = 0;
}

/* Encodes like ludo__json_encode; `stop` as in run_check. [-0, +0, e] */
static void encode_value(lua_State *L, int idx, ludo__buf_t *b, int maxdepth,
                         const char *const *skip, int *stop) {
  enc_t e;
  enc_init(&e, L, b, maxdepth, stop);
  idx = lua_absindex(L, idx);
  if (skip != NULL && lua_type(L, idx) == LUA_TTABLE)
    enc_table(&e, idx, 0, skip);
  else
    enc_value(&e, idx, 0);
}

void ludo__json_encode(lua_State *L, int idx, ludo__buf_t *b, int maxdepth,
                       const char *const *skip) {
  encode_value(L, idx, b, maxdepth, skip, NULL);
}

size_t ludo__json_encode_fields(lua_State *L, int idx, ludo__buf_t *b,
                                int maxdepth, const char *const *skip,
                                const char *name) {
  enc_t e;
  size_t nstr;
  unsigned int pos;
  int pending, base;
  enc_init(&e, L, b, maxdepth, NULL);
  e.path.elems[0].key = name; /* a path element over the depth's room */
  e.path.elems[0].klen = strlen(name);
  e.path.n = 1;
  idx = lua_absindex(L, idx);
  base = lua_gettop(L);
  if (keep_pairs(L, idx, 1, &nstr, &pending, &pos))
    return write_fields(&e, base, nstr, 0, skip);
  /* Not kept: count the rest, failing at the first key that is no
   * string (the walk goes on from where keep_pairs stopped). */
  if (pending && lua_type(L, -1) != LUA_TSTRING) {
    lua_pop(L, 1);
    enc_fail(&e, "object has a key that is not a string");
  }
  nstr += (size_t)pending;
  while (ludo__walk_next(L, idx, &pos)) {
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

/* encode_protected(value, buf, maxdepth, stop): the encoder under
 * lua_pcall. [-0, +0, e] */
static int encode_protected(lua_State *L) {
  ludo__buf_t *b = lua_touserdata(L, 2);
  int maxdepth = (int)lua_tointeger(L, 3);
  encode_value(L, 1, b, maxdepth, NULL, lua_touserdata(L, 4));
  return 0;
}

/* decode_protected(text, maxdepth, stop): the decoder under lua_pcall.
 * [-0, +1, e] */
static int decode_protected(lua_State *L) {
  size_t n;
  const char *s = lua_tolstring(L, 1, &n);
  decode_text(L, s, n, (int)lua_tointeger(L, 2), lua_touserdata(L, 3), 0);
  return 1;
}

/* After a failed protected call: raises again memory errors and the check
 * hook's error, else turns the error on top into fail, message, code.
 * [-1, +3, e] */
static int soft_error(lua_State *L, int status, int stop, const char *code) {
  int c;
  if (status == LUA_ERRMEM || stop) lua_error(L);
  c = ludo__error_code(L, -1);
  if (c == LUDO_ENOMEM) lua_error(L); /* as a memory error would */
  if (c != 0) {
    code = ludo__err_name(c);
    ludo__error_push_message(L, -1);
    lua_remove(L, -2);
  }
  luaL_pushfail(L);
  lua_insert(L, -2);
  lua_pushstring(L, code);
  return 3;
}

/* ludo.json.encode(value [, maxdepth]) -> string | nil, err, code */
static int ludo_l_json_encode(lua_State *L) {
  int maxdepth = (int)luaL_optinteger(L, 2, LUDO__JSON_MAXDEPTH);
  int status, stop = 0;
  buf_box_t *box;
  luaL_checkany(L, 1);
  lua_settop(L, 1);
  box = new_buf_box(L);
  /* stack: value, box */
  lua_pushcfunction(L, encode_protected);
  lua_pushvalue(L, 1);
  lua_pushlightuserdata(L, &box->b);
  lua_pushinteger(L, maxdepth);
  lua_pushlightuserdata(L, &stop);
  status = lua_pcall(L, 4, 0, 0);
  if (status != LUA_OK) return soft_error(L, status, stop, "EVALUE");
  lua_pushlstring(L, box->b.p ? box->b.p : "", box->b.len);
  ludo__buf_free(&box->b);
  return 1;
}

/* ludo.json.decode(text [, maxdepth]) -> value | nil, err, code */
static int ludo_l_json_decode(lua_State *L) {
  int maxdepth = (int)luaL_optinteger(L, 2, LUDO__JSON_MAXDEPTH);
  int status, stop = 0;
  luaL_checkstring(L, 1);
  lua_settop(L, 1);
  lua_pushcfunction(L, decode_protected);
  lua_insert(L, 1);
  /* stack: decode_protected, text */
  lua_pushinteger(L, maxdepth);
  lua_pushlightuserdata(L, &stop);
  status = lua_pcall(L, 3, 1, 0);
  if (status != LUA_OK) return soft_error(L, status, stop, "EPARSE");
  return 1;
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
  lua_createtable(L, 0, 5);
  lua_pushcfunction(L, ludo_l_json_encode);
  lua_setfield(L, -2, "encode");
  lua_pushcfunction(L, ludo_l_json_decode);
  lua_setfield(L, -2, "decode");
  lua_pushcfunction(L, ludo_l_json_array);
  lua_setfield(L, -2, "array");
  lua_pushcfunction(L, ludo_l_json_is_array);
  lua_setfield(L, -2, "is_array");
  ludo__json_pushnull(L);
  lua_setfield(L, -2, "null");
  return 1;
}
