/* bytecode.c - trimming the debug information of Lua 5.4 binary chunks
 * (see bytecode.h).
 *
 * The format is what Lua 5.4's lua_dump writes (ldump.c): a header, the
 * number of upvalues of the main closure, then the main function. A
 * function is: source (string), first and last line (sizes), number of
 * parameters, vararg flag and stack size (bytes), code (size, then 4-byte
 * instructions), constants (size, then a tag byte and its value each),
 * upvalue descriptions (size, then 3 bytes each), nested functions (size,
 * then functions), and the debug information: line deltas (size, then a
 * byte each), absolute lines (size, then pairs of sizes), local variables
 * (size, then name, start pc and end pc each) and upvalue names (size,
 * then strings). Sizes are unsigned numbers written 7 bits a byte, most
 * significant first, the last byte marked by its top bit; a string is its
 * size + 1 (0 for none) followed by its bytes. */
#include "core/bytecode.h"

#include <lua.h>
#include <string.h>

#include "ludo_defs.h"

#if LUA_VERSION_NUM != 504
#error "bytecode.c reads the binary chunks of Lua 5.4"
#endif

/* Type tags of constants (lobject.h: makevariant(type, variant)). */
enum {
  TAG_NIL = 0, TAG_FALSE = 1, TAG_TRUE = 1 | (1 << 4), TAG_INT = 3,
  TAG_FLT = 3 | (1 << 4), TAG_SHRSTR = 4, TAG_LNGSTR = 4 | (1 << 4)
};

/* Nesting of functions the reader follows; Lua's parser stops far
 * earlier (LUAI_MAXCCALLS). */
#define MAX_DEPTH 250

typedef struct {
  const unsigned char *p, *end;
  ludo__buf_t *out;
  unsigned keep;
  int err;                /* 0, LUDO_EINVAL or LUDO_ENOMEM */
} trim_t;

static void fail(trim_t *t, int err) {
  if (t->err == 0) t->err = err;
  t->p = t->end;
}

/* Copies n bytes from the input (or skips them when !copy). */
static void take(trim_t *t, size_t n, int copy) {
  if (t->err) return;
  if ((size_t)(t->end - t->p) < n) {
    fail(t, LUDO_EINVAL);
    return;
  }
  if (copy && ludo__buf_add(t->out, t->p, n)) fail(t, LUDO_ENOMEM);
  t->p += n;
}

/* Reads a size (see the top of the file), copying its bytes when copy. */
static size_t size_(trim_t *t, int copy) {
  const unsigned char *start = t->p;
  size_t x = 0;
  for (;;) {
    unsigned b;
    if (t->err || t->p >= t->end || x > (((size_t)-1) >> 7)) {
      fail(t, LUDO_EINVAL);
      return 0;
    }
    b = *t->p++;
    x = (x << 7) | (b & 0x7f);
    if (b & 0x80) break;
  }
  if (copy && ludo__buf_add(t->out, start, (size_t)(t->p - start)))
    fail(t, LUDO_ENOMEM);
  return x;
}

static void put_zero(trim_t *t) {
  if (!t->err && ludo__buf_addc(t->out, (char)0x80)) fail(t, LUDO_ENOMEM);
}

/* A string: its size + 1 (0 for none), then its bytes. */
static void string_(trim_t *t, int copy) {
  size_t n = size_(t, copy);
  if (n > 0) take(t, n - 1, copy);
}

static void function_(trim_t *t, int depth) {
  size_t i, n;
  if (depth > MAX_DEPTH) {
    fail(t, LUDO_EINVAL);
    return;
  }
  string_(t, 1);                        /* source */
  size_(t, 1);                          /* linedefined */
  size_(t, 1);                          /* lastlinedefined */
  take(t, 3, 1);                        /* numparams, is_vararg, stack */
  n = size_(t, 1);                      /* code */
  if (n > (size_t)(t->end - t->p) / 4) {
    fail(t, LUDO_EINVAL);
    return;
  }
  take(t, n * 4, 1);
  n = size_(t, 1);                      /* constants */
  for (i = 0; i < n && !t->err; i++) {
    unsigned tag;
    if (t->p >= t->end) {
      fail(t, LUDO_EINVAL);
      return;
    }
    tag = *t->p;
    take(t, 1, 1);
    switch (tag) {
      case TAG_NIL: case TAG_FALSE: case TAG_TRUE: break;
      case TAG_INT: take(t, sizeof(lua_Integer), 1); break;
      case TAG_FLT: take(t, sizeof(lua_Number), 1); break;
      case TAG_SHRSTR: case TAG_LNGSTR: string_(t, 1); break;
      default: fail(t, LUDO_EINVAL); return;
    }
  }
  n = size_(t, 1);                      /* upvalue descriptions */
  if (n > (size_t)(t->end - t->p) / 3) {
    fail(t, LUDO_EINVAL);
    return;
  }
  take(t, n * 3, 1);
  n = size_(t, 1);                      /* nested functions */
  for (i = 0; i < n && !t->err; i++) function_(t, depth + 1);
  n = size_(t, 1);                      /* line deltas */
  take(t, n, 1);
  n = size_(t, 1);                      /* absolute lines */
  for (i = 0; i < n && !t->err; i++) {
    size_(t, 1);
    size_(t, 1);
  }
  {                                     /* local variables */
    int copy = (t->keep & LUDO__BC_LOCALS) != 0;
    n = size_(t, copy);
    if (!copy) put_zero(t);
    for (i = 0; i < n && !t->err; i++) {
      string_(t, copy);
      size_(t, copy);
      size_(t, copy);
    }
  }
  {                                     /* upvalue names */
    int copy = (t->keep & LUDO__BC_UPNAMES) != 0;
    n = size_(t, copy);
    if (!copy) put_zero(t);
    for (i = 0; i < n && !t->err; i++) string_(t, copy);
  }
}

int ludo__bytecode_trim(const char *bc, size_t n, unsigned keep,
                        ludo__buf_t *out) {
  /* The header this Lua writes: signature, version 5.4, format 0, the
   * conversion check bytes, and the sizes of an instruction, an integer
   * and a float; then a test integer and a test float. */
  static const unsigned char head[] = {0x1b, 'L', 'u', 'a', 0x54, 0,
                                       0x19, 0x93, '\r', '\n', 0x1a, '\n',
                                       4, sizeof(lua_Integer),
                                       sizeof(lua_Number)};
  trim_t t;
  t.p = (const unsigned char *)bc;
  t.end = t.p + n;
  t.out = out;
  t.keep = keep;
  t.err = 0;
  if (n < sizeof head || memcmp(bc, head, sizeof head) != 0)
    return LUDO_EINVAL;
  take(&t, sizeof head + sizeof(lua_Integer) + sizeof(lua_Number), 1);
  take(&t, 1, 1); /* upvalues of the main closure */
  function_(&t, 0);
  if (t.err == 0 && t.p != t.end) t.err = LUDO_EINVAL;
  return t.err;
}
