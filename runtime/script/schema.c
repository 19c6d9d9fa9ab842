/* schema.c - JSON Schema checks of Lua values (see schema.h). */
#include "script/schema.h"

#include <jansson.h>
#include <lauxlib.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"
#include "base/realtext.h"
#include "base/regex.h"
#include "base/utf8.h"
#include "ludo_defs.h"
#include "script/json.h"
#include "script/state.h"
#include "script/tablewalk.h"

enum {
  T_NULL = 1, T_BOOLEAN = 2, T_INTEGER = 4, T_NUMBER = 8, T_STRING = 16,
  T_ARRAY = 32, T_OBJECT = 64
};

typedef struct node_s node_t;

typedef struct {
  const char *name;
  size_t len;
  node_t *schema;
} prop_t;

struct node_s {
  int never;                 /* the schema `false`: nothing matches */
  unsigned types;            /* allowed types; 0 = any */
  prop_t *props;
  size_t nprops;
  prop_t *required;          /* names (point into the jansson tree), with
                                their strlen; no schema */
  size_t nrequired;
  int has_object_rules;
  int additional;            /* 1 allowed, 0 forbidden, 2 schema */
  node_t *additional_schema;
  node_t *items;
  json_t *enum_, *const_;    /* borrowed from the tree */
  int has_min, has_max, has_xmin, has_xmax;
  double min, max, xmin, xmax;
  long min_len, max_len, min_items, max_items; /* -1: none */
  node_t **any, **one, **all;
  size_t nany, none, nall;
  node_t *ref;               /* $ref's target: checked too */
  node_t *not_;              /* not: must fail */
  ludo__regex_t *pattern;    /* pattern (a search, as ECMA-262's test) */
  double multiple;           /* multipleOf; 0: none */
  long min_props, max_props; /* -1: none */
  node_t *next_alloc;        /* all nodes, for freeing */
};

struct ludo__schema_s {
  ludo__alloc_t *heap;
  json_t *tree;
  node_t *root;
  node_t *nodes;             /* allocation list */
  size_t bytes;              /* extra arrays allocated */
};

/* ---- jansson's memory ------------------------------------------------ */

/* jansson's allocator is process-wide (json_set_alloc_funcs), so it is
 * installed once and routes by a thread-local "current" heap, which this
 * file sets around every jansson call that allocates or frees a schema's
 * tree (compile and free). A block allocated while a heap is current comes
 * from that heap with a header naming the heap and the size, so the stats
 * count it and the free is accounted; any other block (no heap current:
 * the host's own jansson use, json_dumps for messages) goes to the
 * functions jansson had before (malloc and free, or a host's own set
 * with json_set_alloc_funcs before its first runtime), without a header,
 * so a host's blocks keep their allocator. A tree is always freed with a
 * heap current, and jansson frees nothing of a tree outside those calls
 * (it is never modified after compiling), so the two kinds never mix. */

typedef union {
  struct {
    ludo__alloc_t *heap;
    size_t size;
  } h;
  max_align_t align;
} jhdr_t;

static _Thread_local ludo__alloc_t *jheap;
static pthread_once_t jalloc_once = PTHREAD_ONCE_INIT;
/* The functions jansson had when ludo installed its own: every block
 * allocated with no heap current goes to them. */
static json_malloc_t host_malloc = malloc;
static json_free_t host_free = free;

/* While a compile parses its text: the bytes its tree holds, and the bound
 * on them (0: none); jlimit_hit says the bound refused a block, jnomem
 * that the heap did (jansson's lexer reports a refused block as a syntax
 * error: "invalid token near '"string"'"). */
static _Thread_local size_t jused, jlimit;
static _Thread_local int jlimit_hit, jnomem;

static void *jmalloc(size_t n) {
  ludo__alloc_t *heap = jheap;
  jhdr_t *h;
  if (heap == NULL) return host_malloc(n);
  if (n > (size_t)-1 - sizeof *h) return NULL;
  if (jlimit != 0 && sizeof *h + n > jlimit - jused) {
    jlimit_hit = 1;
    return NULL;
  }
  h = ludo__malloc(heap, sizeof *h + n);
  if (h == NULL) {
    jnomem = 1;
    return NULL;
  }
  h->h.heap = heap;
  h->h.size = sizeof *h + n;
  jused += h->h.size;
  return h + 1;
}

static void jfree(void *p) {
  jhdr_t *h;
  if (p == NULL) return;
  if (jheap == NULL) {
    host_free(p);
    return;
  }
  h = (jhdr_t *)p - 1;
  jused -= jused >= h->h.size ? h->h.size : jused;
  ludo__free(h->h.heap, h, h->h.size);
}

static void jalloc_install(void) {
  json_get_alloc_funcs(&host_malloc, &host_free);
  json_set_alloc_funcs(jmalloc, jfree);
}

/* Makes `heap` current for jansson on this thread; returns the previous
 * one, to give back to jalloc_leave. */
static ludo__alloc_t *jalloc_enter(ludo__alloc_t *heap) {
  ludo__alloc_t *prev = jheap;
  pthread_once(&jalloc_once, jalloc_install);
  jheap = heap;
  return prev;
}

static void jalloc_leave(ludo__alloc_t *prev) {
  jheap = prev;
}

/* ---- compiling ------------------------------------------------------- */

/* A $ref already compiled: its target in the tree, and its node. */
typedef struct {
  json_t *target;
  node_t *node;
} ref_t;

/* Subschemas compiled inside each other at most (properties, items,
 * combinators, not and the chain of $refs a target's own $ref starts):
 * the compile recurses in C, and a schema's text can chain $refs without
 * nesting its JSON. The checks nest as deep (CHECK_FRAMES). */
#define COMPILE_DEPTH 512

/* The compile asks `stop` once every this many nodes. */
#define COMPILE_POLL 256u

typedef struct {
  ludo__schema_t *s;
  const ludo__schema_limits_t *lim;
  char *err;
  size_t errlen;
  int failed;
  int depth;                 /* subschemas being compiled, nested */
  size_t nodes;              /* nodes made so far */
  size_t bytes;              /* what the compile holds besides the tree */
  ref_t *refs;               /* $refs compiled: an open-addressing table */
  size_t nrefs, refcap;      /* entries, slots (a power of two or 0) */
  char path[256];            /* JSON pointer of the node being compiled */
} comp_t;

static void *bad(comp_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Fails the compile with `code` and "ECODE: schema: <what>" (the first
 * failure only). */
static void fail_with(comp_t *c, int code, const char *what) {
  if (c->failed) return;
  c->failed = code;
  snprintf(c->err, c->errlen, "%s: schema: %s", ludo__err_name(code),
           what);
}

static void *comp_alloc(comp_t *c, size_t n) {
  size_t max = c->lim ? c->lim->max_bytes : 0;
  void *p;
  if (max != 0 && n > max - (c->bytes + jused < max ? c->bytes + jused
                                                     : max)) {
    char what[96];
    snprintf(what, sizeof what, "compiled, it would hold more than %zu "
             "MiB (the memory cap)", max >> 20);
    fail_with(c, LUDO_ENOMEM, what);
    return NULL;
  }
  p = ludo__calloc(c->s->heap, n);
  if (p == NULL) c->failed = LUDO_ENOMEM;
  else c->bytes += n;
  return p;
}

static unsigned type_bit(const char *t) {
  if (strcmp(t, "null") == 0) return T_NULL;
  if (strcmp(t, "boolean") == 0) return T_BOOLEAN;
  if (strcmp(t, "integer") == 0) return T_INTEGER;
  if (strcmp(t, "number") == 0) return T_NUMBER | T_INTEGER;
  if (strcmp(t, "string") == 0) return T_STRING;
  if (strcmp(t, "array") == 0) return T_ARRAY;
  if (strcmp(t, "object") == 0) return T_OBJECT;
  return 0;
}

/* Fails the compile with "EPARSE: schema: <path>: <what>" (the first
 * failure only). Returns NULL, for the callers' convenience. */
static void *bad(comp_t *c, const char *fmt, ...) {
  va_list ap;
  int n;
  if (c->failed) return NULL;
  c->failed = LUDO_EPARSE;
  n = snprintf(c->err, c->errlen, "EPARSE: schema: %s: ",
               c->path[0] ? c->path : "(root)");
  if (n < 0 || (size_t)n >= c->errlen) return NULL;
  va_start(ap, fmt);
  vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
  va_end(ap);
  return NULL;
}

/* Appends "/<key>" to the path; returns the old length to restore. */
static size_t path_push(comp_t *c, const char *key) {
  size_t len = strlen(c->path);
  snprintf(c->path + len, sizeof c->path - len, "/%s", key);
  return len;
}

static node_t *compile_node(comp_t *c, json_t *j);

/* The subschema of j at `key` (an object or a boolean), compiled with the
 * path extended. */
static node_t *compile_at(comp_t *c, json_t *sub, const char *key) {
  size_t len = path_push(c, key);
  node_t *n = NULL;
  if (!json_is_object(sub) && !json_is_boolean(sub))
    bad(c, "expected a schema (an object or a boolean)");
  else
    n = compile_node(c, sub);
  c->path[len] = '\0';
  return n;
}

static node_t **compile_list(comp_t *c, json_t *arr, const char *kw,
                             size_t *n) {
  node_t **out;
  size_t i;
  char key[48];
  *n = 0;
  if (arr == NULL) return NULL;
  if (!json_is_array(arr) || json_array_size(arr) == 0)
    return bad(c, "%s must be a non-empty array of schemas", kw);
  out = comp_alloc(c, json_array_size(arr) * sizeof *out);
  if (out == NULL) return NULL;
  *n = json_array_size(arr);
  for (i = 0; i < *n; i++) {
    snprintf(key, sizeof key, "%s/%zu", kw, i);
    out[i] = compile_at(c, json_array_get(arr, i), key);
  }
  return out;
}

/* A number keyword: absent (0), or a number (1, in *d). */
static int num_of(comp_t *c, json_t *j, const char *kw, double *d) {
  json_t *v = json_object_get(j, kw);
  if (v == NULL) return 0;
  if (!json_is_number(v)) {
    bad(c, "%s must be a number", kw);
    return 0;
  }
  *d = json_number_value(v);
  return 1;
}

/* A count keyword (minLength, maxItems, ...): -1 when absent; a
 * non-negative integer, written as one or as an integral real (8.0, as a
 * Lua table gives 2^3). */
static long count_of(comp_t *c, json_t *j, const char *kw) {
  json_t *v = json_object_get(j, kw);
  double d = json_number_value(v);
  if (v == NULL) return -1;
  if (!json_is_number(v) || !(d >= 0) || d != floor(d) || d > 9.0e15) {
    bad(c, "%s must be a non-negative integer", kw);
    return -1;
  }
  return (long)d;
}

static node_t *new_node(comp_t *c) {
  node_t *n;
  if (c->failed) return NULL;
  if (++c->nodes % COMPILE_POLL == 0 && c->lim && c->lim->stop &&
      c->lim->stop(c->lim->ud)) {
    fail_with(c, LUDO_ETIMEOUT, "compiling it was stopped");
    return NULL;
  }
  n = comp_alloc(c, sizeof *n);
  if (n == NULL) return NULL;
  n->next_alloc = c->s->nodes;
  c->s->nodes = n;
  n->additional = 1;
  n->min_len = n->max_len = n->min_items = n->max_items = -1;
  n->min_props = n->max_props = -1;
  return n;
}

static void fill_node(comp_t *c, node_t *n, json_t *j);
static void fill_deeper(comp_t *c, node_t *n, json_t *j);

/* The slot of `t` in the $ref table: its entry, or the empty slot where
 * it goes. The table must have a free slot. */
static ref_t *ref_slot(const comp_t *c, const json_t *t) {
  size_t mask = c->refcap - 1;
  size_t i = (size_t)(((uintptr_t)t >> 4) * 0x9E3779B97F4A7C15u) & mask;
  while (c->refs[i].target != NULL && c->refs[i].target != t)
    i = (i + 1) & mask;
  return &c->refs[i];
}

/* Makes room for one more entry (the table at most half full). Returns 0
 * or -1 (the compile failed). */
static int refs_grow(comp_t *c) {
  ref_t *old = c->refs;
  size_t oldcap = c->refcap, i;
  if ((c->nrefs + 1) * 2 <= c->refcap) return 0;
  c->refcap = oldcap ? oldcap * 2 : 16;
  c->refs = comp_alloc(c, c->refcap * sizeof *c->refs);
  if (c->refs == NULL) {
    c->refs = old;
    c->refcap = oldcap;
    return -1;
  }
  for (i = 0; i < oldcap; i++)
    if (old[i].target != NULL) *ref_slot(c, old[i].target) = old[i];
  if (old != NULL) {
    ludo__free(c->s->heap, old, oldcap * sizeof *old);
    c->bytes -= oldcap * sizeof *old;
  }
  return 0;
}

/* Resolves a local $ref ("#", "#/$defs/Name", any JSON pointer into this
 * schema) to the node of its target, compiled once. */
static node_t *compile_ref(comp_t *c, json_t *v) {
  const char *p;
  json_t *t = c->s->tree;
  ref_t *r;
  node_t *node;
  char tok[256];
  if (!json_is_string(v) || json_string_value(v)[0] != '#')
    return bad(c, "$ref must be a reference into this schema (\"#...\"); "
                  "other documents are not loaded");
  p = json_string_value(v) + 1;
  while (*p == '/') {
    size_t n = 0;
    for (p++; *p && *p != '/'; p++) {
      char ch = *p;
      if (ch == '~' && (p[1] == '0' || p[1] == '1')) ch = *++p == '0' ? '~'
                                                                     : '/';
      if (n + 1 >= sizeof tok)
        return bad(c, "$ref %.64s...: a part of it is longer than %zu bytes",
                   json_string_value(v), sizeof tok - 1);
      tok[n++] = ch;
    }
    tok[n] = '\0';
    if (json_is_object(t)) {
      t = json_object_get(t, tok);
    } else if (json_is_array(t)) {
      char *end;
      unsigned long i = strtoul(tok, &end, 10);
      t = *tok && *end == '\0' ? json_array_get(t, i) : NULL;
    } else {
      t = NULL;
    }
    if (t == NULL) break;
  }
  if (t == NULL || *p != '\0')
    return bad(c, "$ref %s points at nothing in this schema",
               json_string_value(v));
  if (c->refcap != 0 && (r = ref_slot(c, t))->target != NULL) return r->node;
  if (!json_is_object(t) && !json_is_boolean(t))
    return bad(c, "$ref %s is not a schema", json_string_value(v));
  if (refs_grow(c) != 0 || (node = new_node(c)) == NULL) return NULL;
  r = ref_slot(c, t);
  r->target = t;
  r->node = node;
  c->nrefs++; /* before filling it: a recursive schema meets it there */
  {
    char saved[sizeof c->path];
    memcpy(saved, c->path, sizeof saved);
    snprintf(c->path, sizeof c->path, "%s", json_string_value(v) + 1);
    fill_deeper(c, node, t);
    memcpy(c->path, saved, sizeof saved);
  }
  return node;
}

/* Keywords that assert something and that this checker does not
 * implement: refused, so a schema never passes what it would reject. */
static const char *const unsupported[] = {
  "patternProperties", "propertyNames", "dependentRequired",
  "dependentSchemas", "dependencies", "if", "then", "else", "prefixItems",
  "contains", "minContains", "maxContains", "unevaluatedProperties",
  "unevaluatedItems", "additionalItems", "$dynamicRef", "$recursiveRef",
  NULL
};

static int add_type(comp_t *c, node_t *n, json_t *v) {
  const char *t = json_string_value(v);
  unsigned bit = t ? type_bit(t) : 0;
  if (bit == 0) {
    bad(c, "unknown type %s%s%s (null, boolean, integer, number, string, "
        "array or object)", t ? "'" : "", t ? t : "(not a string)",
        t ? "'" : "");
    return -1;
  }
  n->types |= bit;
  return 0;
}

static void compile_types(comp_t *c, node_t *n, json_t *v) {
  size_t i;
  if (v == NULL) return;
  if (json_is_string(v)) {
    add_type(c, n, v);
    return;
  }
  if (!json_is_array(v) || json_array_size(v) == 0) {
    bad(c, "type must be a type name or a list of them");
    return;
  }
  for (i = 0; i < json_array_size(v); i++)
    if (add_type(c, n, json_array_get(v, i)) != 0) return;
}

static void compile_object_rules(comp_t *c, node_t *n, json_t *j) {
  json_t *v = json_object_get(j, "properties");
  if (v != NULL && !json_is_object(v)) {
    bad(c, "properties must be an object");
  } else if (v != NULL && json_object_size(v) > 0) {
    const char *k;
    json_t *sub;
    size_t i = 0;
    n->props = comp_alloc(c, json_object_size(v) * sizeof *n->props);
    if (n->props == NULL) return;
    n->nprops = json_object_size(v);
    json_object_foreach(v, k, sub) {
      char key[128];
      snprintf(key, sizeof key, "properties/%s", k);
      n->props[i].name = k;
      n->props[i].len = strlen(k);
      n->props[i].schema = compile_at(c, sub, key);
      i++;
    }
    n->has_object_rules = 1;
  }
  v = json_object_get(j, "required");
  if (v != NULL) {
    size_t i;
    if (!json_is_array(v)) {
      bad(c, "required must be an array of names");
      return;
    }
    for (i = 0; i < json_array_size(v); i++)
      if (!json_is_string(json_array_get(v, i))) {
        bad(c, "required must be an array of names");
        return;
      }
    if (json_array_size(v) > 0) {
      n->required = comp_alloc(c, json_array_size(v) * sizeof *n->required);
      if (n->required == NULL) return;
      for (i = 0; i < json_array_size(v); i++) {
        prop_t *r = &n->required[n->nrequired++];
        r->name = json_string_value(json_array_get(v, i));
        r->len = strlen(r->name); /* the name as lua_pushstring saw it */
        r->schema = NULL;
      }
      n->has_object_rules = 1;
    }
  }
  v = json_object_get(j, "additionalProperties");
  if (json_is_false(v)) { /* the same as the schema false, faster */
    n->additional = 0;
    n->has_object_rules = 1;
  } else if (v != NULL && !json_is_true(v)) {
    n->additional = 2;
    n->additional_schema = compile_at(c, v, "additionalProperties");
    n->has_object_rules = 1;
  }
  n->min_props = count_of(c, j, "minProperties");
  n->max_props = count_of(c, j, "maxProperties");
  if (n->min_props >= 0 || n->max_props >= 0) n->has_object_rules = 1;
}

static void compile_pattern(comp_t *c, node_t *n, json_t *v) {
  char err[160];
  if (v == NULL) return;
  if (!json_is_string(v)) {
    bad(c, "pattern must be a string");
    return;
  }
  n->pattern = comp_alloc(c, sizeof *n->pattern);
  if (n->pattern == NULL) return;
  if (ludo__regex_compile(n->pattern, json_string_value(v),
                          json_string_length(v), LUDO_RE_UTF, ludo__alloc_fn,
                          c->s->heap, err, sizeof err) != 0)
    bad(c, "pattern: %s", err);
}

/* Fills `n` from `j` one level deeper, within COMPILE_DEPTH. */
static void fill_deeper(comp_t *c, node_t *n, json_t *j) {
  if (c->depth >= COMPILE_DEPTH) {
    bad(c, "subschemas nest more than %d deep here (properties, items, "
        "anyOf/oneOf/allOf, not and the $refs they reach)", COMPILE_DEPTH);
    return;
  }
  c->depth++;
  fill_node(c, n, j);
  c->depth--;
}

static node_t *compile_node(comp_t *c, json_t *j) {
  node_t *n = new_node(c);
  if (n != NULL) fill_deeper(c, n, j);
  return n;
}

static void fill_node(comp_t *c, node_t *n, json_t *j) {
  json_t *v;
  size_t i;
  if (!json_is_object(j)) {
    n->never = json_is_false(j); /* true allows all */
    return;
  }
  for (i = 0; unsupported[i]; i++)
    if (json_object_get(j, unsupported[i]) != NULL)
    {
      bad(c, "keyword '%s' is not supported (docs/environments.md)",
          unsupported[i]);
      return;
    }
  v = json_object_get(j, "uniqueItems");
  if (v != NULL && !json_is_false(v)) {
    bad(c, "keyword 'uniqueItems' is not supported (docs/environments.md)");
    return;
  }
  compile_types(c, n, json_object_get(j, "type"));
  compile_object_rules(c, n, j);
  v = json_object_get(j, "items");
  if (json_is_array(v)) {
    bad(c, "items as a list (tuples) is not supported");
    return;
  }
  if (v != NULL && !json_is_true(v)) n->items = compile_at(c, v, "items");
  v = json_object_get(j, "enum");
  if (v != NULL && !json_is_array(v)) {
    bad(c, "enum must be an array");
    return;
  }
  n->enum_ = v;
  n->const_ = json_object_get(j, "const");
  n->has_min = num_of(c, j, "minimum", &n->min);
  n->has_max = num_of(c, j, "maximum", &n->max);
  n->has_xmin = num_of(c, j, "exclusiveMinimum", &n->xmin);
  n->has_xmax = num_of(c, j, "exclusiveMaximum", &n->xmax);
  if (num_of(c, j, "multipleOf", &n->multiple) && !(n->multiple > 0))
    bad(c, "multipleOf must be a number above 0");
  n->min_len = count_of(c, j, "minLength");
  n->max_len = count_of(c, j, "maxLength");
  n->min_items = count_of(c, j, "minItems");
  n->max_items = count_of(c, j, "maxItems");
  compile_pattern(c, n, json_object_get(j, "pattern"));
  n->any = compile_list(c, json_object_get(j, "anyOf"), "anyOf", &n->nany);
  n->one = compile_list(c, json_object_get(j, "oneOf"), "oneOf", &n->none);
  n->all = compile_list(c, json_object_get(j, "allOf"), "allOf", &n->nall);
  v = json_object_get(j, "not");
  if (v != NULL) n->not_ = compile_at(c, v, "not");
  v = json_object_get(j, "$ref");
  if (v != NULL) n->ref = compile_ref(c, v);
}

/* Parses the text into s->tree (jansson allocating from s->heap).
 * Returns 0, LUDO_EPARSE or LUDO_ENOMEM with a message in err. */
static int load_tree(ludo__schema_t *s, const char *json, size_t len,
                     size_t max_bytes, char *err, size_t errlen) {
  json_error_t jerr;
  ludo__alloc_t *prev;
  int hit, nomem;
  memset(&jerr, 0, sizeof jerr); /* jansson may fail before setting it */
  prev = jalloc_enter(s->heap);
  jused = 0;
  jlimit = max_bytes;
  jlimit_hit = 0;
  jnomem = 0;
  s->tree = json_loadb(json, len, JSON_DECODE_ANY, &jerr);
  hit = jlimit_hit;
  nomem = jnomem;
  jlimit = 0;
  jalloc_leave(prev);
  if (s->tree != NULL) return 0;
  if (hit) {
    snprintf(err, errlen, "ENOMEM: schema: its tree would hold more than "
             "%zu MiB (the memory cap)", max_bytes >> 20);
    return LUDO_ENOMEM;
  }
  if (nomem || json_error_code(&jerr) == json_error_out_of_memory ||
      jerr.text[0] == '\0') {
    snprintf(err, errlen, "ENOMEM: schema: %s", jerr.text);
    return LUDO_ENOMEM;
  }
  snprintf(err, errlen, "EPARSE: schema: %s at line %d column %d",
           jerr.text, jerr.line, jerr.column);
  return LUDO_EPARSE;
}

int ludo__schema_compile(ludo__alloc_t *heap, const char *json, size_t len,
                         const ludo__schema_limits_t *lim,
                         ludo__schema_t **out, char *err, size_t errlen) {
  comp_t c;
  ludo__schema_t *s;
  int rc;
  *out = NULL;
  if (errlen > 0) snprintf(err, errlen, "ENOMEM: schema: out of memory");
  s = ludo__calloc(heap, sizeof *s);
  if (s == NULL) return LUDO_ENOMEM;
  s->heap = heap;
  rc = load_tree(s, json, len, lim ? lim->max_bytes : 0, err, errlen);
  if (rc != 0) {
    ludo__free(heap, s, sizeof *s);
    return rc;
  }
  memset(&c, 0, sizeof c);
  c.s = s;
  c.lim = lim;
  c.err = err;
  c.errlen = errlen;
  s->root = compile_node(&c, s->tree);
  ludo__free(heap, c.refs, c.refcap * sizeof *c.refs);
  jused = 0;
  if (c.failed) {
    ludo__schema_free(s);
    return c.failed;
  }
  *out = s;
  return 0;
}

static void free_node(ludo__alloc_t *h, node_t *n) {
  ludo__free(h, n->props, n->nprops * sizeof *n->props);
  ludo__free(h, n->required, n->nrequired * sizeof *n->required);
  ludo__free(h, n->any, n->nany * sizeof *n->any);
  ludo__free(h, n->one, n->none * sizeof *n->one);
  ludo__free(h, n->all, n->nall * sizeof *n->all);
  if (n->pattern != NULL) {
    ludo__regex_free(n->pattern);
    ludo__free(h, n->pattern, sizeof *n->pattern);
  }
  ludo__free(h, n, sizeof *n);
}

void ludo__schema_free(ludo__schema_t *s) {
  node_t *n, *next;
  if (s == NULL) return;
  for (n = s->nodes; n; n = next) {
    next = n->next_alloc;
    free_node(s->heap, n);
  }
  if (s->tree) {
    ludo__alloc_t *prev = jalloc_enter(s->heap);
    json_decref(s->tree);
    jalloc_leave(prev);
  }
  ludo__free(s->heap, s, sizeof *s);
}

/* ---- checking -------------------------------------------------------- */

/* The state of one check. ludo__schema_check_except sets every field but
 * `path`, whose entries are written before they are read (path[depth] is
 * set before depth grows past it): zeroing its 1.5 KiB for each check
 * cost more than the rest of checking a small action. */
typedef struct {
  lua_State *L;
  ludo__state_t *st;       /* L's ludo state (NULL in a foreign state) */
  ludo__buf_t *msg;
  const char *root;
  /* path */
  struct {
    const char *key;
    size_t klen;
    lua_Integer index;
  } path[64];
  int depth;
  int quiet; /* inside anyOf/oneOf probes: no message */
  const char *const *skip; /* keys of the root object taken as absent */
  int hops;                /* $refs followed without going deeper */
  int frames;              /* check() calls inside each other */
  unsigned steps;          /* check() calls so far */
  int stopped;             /* the running call's budget ran out */
  int hard;                /* a limit failed the check: no `not`, anyOf
                              or oneOf turns that into a pass */
  struct memo_s *memo;     /* remembered outcomes (memo_find), or NULL */
} chk_t;

/* 1 when key k is one the check leaves out: a key of `skip`, in the root
 * object. */
static int skipped(const chk_t *c, const char *k, size_t klen) {
  const char *const *p;
  if (c->skip == NULL || c->depth != 0) return 0;
  for (p = c->skip; *p; p++)
    if (strlen(*p) == klen && memcmp(*p, k, klen) == 0) return 1;
  return 0;
}

static void put_path(chk_t *c) {
  int i;
  ludo__buf_adds(c->msg, c->root);
  for (i = 0; i < c->depth && i < 64; i++) {
    if (c->path[i].key) {
      ludo__buf_addc(c->msg, '.');
      ludo__buf_add(c->msg, c->path[i].key,
                    c->path[i].klen > 64 ? 64 : c->path[i].klen);
    } else {
      ludo__buf_printf(c->msg, "[%lld]", (long long)c->path[i].index);
    }
  }
}

static int fail(chk_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Values are checked this deep at most; a value the schema wants checked
 * deeper is refused, never let through unchecked. */
#define CHECK_DEPTH 64

static int fail_limit(chk_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int too_deep(chk_t *c) {
  return fail_limit(c, "nested deeper than %d levels", CHECK_DEPTH);
}

/* The message: "<root>.<path>: <what>". */
static void put_msg(chk_t *c, const char *fmt, va_list ap) {
  ludo__buf_reset(c->msg);
  put_path(c);
  ludo__buf_adds(c->msg, ": ");
  ludo__buf_vprintf(c->msg, fmt, ap);
}

static int fail(chk_t *c, const char *fmt, ...) {
  va_list ap;
  if (c->quiet || c->hard) return 0;
  va_start(ap, fmt);
  put_msg(c, fmt, ap);
  va_end(ap);
  return 0;
}

/* A limit (depth, $ref hops, nesting of checks) failed: the whole check
 * fails with this message, inside alternatives and `not` too (a limit
 * never lets a value through unchecked). */
static int fail_limit(chk_t *c, const char *fmt, ...) {
  va_list ap;
  if (c->hard) return 0;
  c->hard = 1;
  va_start(ap, fmt);
  put_msg(c, fmt, ap);
  va_end(ap);
  return 0;
}

/* JSON type of a Lua value: one T_ bit, or T_ARRAY|T_OBJECT for an empty
 * plain table. */
static unsigned lua_json_type(lua_State *L, int idx, int *plain) {
  switch (lua_type(L, idx)) {
    case LUA_TNIL: return T_NULL;
    case LUA_TBOOLEAN: return T_BOOLEAN;
    case LUA_TNUMBER: {
      if (lua_isinteger(L, idx)) return T_INTEGER;
      { /* integral, and within what a Lua integer holds: 1e300 is a
         * JSON integer, but no Lua code can take it as one */
        double d = lua_tonumber(L, idx);
        if (isfinite(d) && d == floor(d) && d >= -0x1p63 && d < 0x1p63)
          return T_NUMBER | T_INTEGER;
      }
      return T_NUMBER;
    }
    case LUA_TSTRING: return T_STRING;
    case LUA_TTABLE: {
      int r;
      if (!lua_getmetatable(L, idx)) {
        /* A table without a metatable is neither the null sentinel (a
         * userdata, or in stock Lua a table with a metatable) nor a
         * decoded array: an object, or an array when t[1] is set (the
         * test below, which says object for an empty one too). */
        if (plain != NULL) *plain = 1;
        r = lua_rawgeti(L, idx, 1) != LUA_TNIL;
        lua_pop(L, 1);
        return r ? T_ARRAY : T_OBJECT;
      }
      lua_pop(L, 1);
      ludo__json_pushnull(L);
      r = lua_rawequal(L, -1, idx);
      lua_pop(L, 1);
      if (r) return T_NULL;
      r = ludo__json_is_array(L, idx);
      if (r) return T_ARRAY;
      /* Arrays decoded from JSON carry the array metatable, so an empty
       * plain table is an empty object. */
      lua_pushnil(L);
      if (!lua_next(L, idx)) return T_OBJECT;
      lua_pop(L, 2);
      r = lua_rawgeti(L, idx, 1) != LUA_TNIL;
      lua_pop(L, 1);
      return r ? T_ARRAY : T_OBJECT;
    }
    case LUA_TUSERDATA: { /* ludo.null is a userdata in sessions */
      int r;
      ludo__json_pushnull(L);
      r = lua_rawequal(L, -1, idx);
      lua_pop(L, 1);
      return r ? T_NULL : 0;
    }
    default: return 0;
  }
}

static const char *type_name(unsigned t) {
  if (t == (T_ARRAY | T_OBJECT)) return "empty table";
  if (t & T_NULL) return "null";
  if (t & T_BOOLEAN) return "boolean";
  if (t == T_INTEGER) return "integer";
  if (t & T_NUMBER) return "number";
  if (t & T_STRING) return "string";
  if (t & T_ARRAY) return "array";
  if (t & T_OBJECT) return "object";
  return "unsupported value";
}

static void types_text(unsigned want, char *out, size_t n) {
  static const struct { unsigned bit; const char *name; } names[] = {
      {T_OBJECT, "object"}, {T_ARRAY, "array"},   {T_STRING, "string"},
      {T_NUMBER, "number"}, {T_INTEGER, "integer"}, {T_BOOLEAN, "boolean"},
      {T_NULL, "null"}};
  size_t i;
  out[0] = '\0';
  for (i = 0; i < sizeof names / sizeof names[0]; i++) {
    if (!(want & names[i].bit)) continue;
    if (names[i].bit == T_INTEGER && (want & T_NUMBER)) continue;
    if (out[0]) strncat(out, " or ", n - strlen(out) - 1);
    strncat(out, names[i].name, n - strlen(out) - 1);
  }
}

/* Compares a Lua value with a JSON value. */
static int equals_json(lua_State *L, int idx, json_t *j) {
  switch (json_typeof(j)) {
    case JSON_STRING: {
      size_t n;
      const char *s;
      if (lua_type(L, idx) != LUA_TSTRING) return 0;
      s = lua_tolstring(L, idx, &n);
      return n == json_string_length(j) &&
             memcmp(s, json_string_value(j), n) == 0;
    }
    case JSON_INTEGER:
    case JSON_REAL:
      return lua_type(L, idx) == LUA_TNUMBER &&
             lua_tonumber(L, idx) == json_number_value(j);
    case JSON_TRUE: return lua_type(L, idx) == LUA_TBOOLEAN &&
                           lua_toboolean(L, idx);
    case JSON_FALSE: return lua_type(L, idx) == LUA_TBOOLEAN &&
                            !lua_toboolean(L, idx);
    case JSON_NULL: return lua_json_type(L, idx, NULL) == T_NULL;
    case JSON_ARRAY: {
      size_t i, n = json_array_size(j);
      int ok = 1;
      if (lua_type(L, idx) != LUA_TTABLE || lua_rawlen(L, idx) != n) return 0;
      for (i = 0; ok && i < n; i++) {
        lua_rawgeti(L, idx, (lua_Integer)i + 1);
        ok = equals_json(L, lua_gettop(L), json_array_get(j, i));
        lua_pop(L, 1);
      }
      return ok;
    }
    case JSON_OBJECT: {
      const char *k;
      json_t *v;
      size_t count = 0;
      unsigned int pos = 0;
      if (lua_type(L, idx) != LUA_TTABLE) return 0;
      json_object_foreach(j, k, v) {
        int ok;
        lua_pushstring(L, k);
        lua_rawget(L, idx);
        ok = equals_json(L, lua_gettop(L), v);
        lua_pop(L, 1);
        if (!ok) return 0;
      }
      lua_pushnil(L);
      while (ludo__walk_next(L, idx, &pos)) {
        lua_pop(L, 1);
        count++;
      }
      return count == json_object_size(j);
    }
  }
  return 0;
}

/* Writes the JSON text of j (cut to n bytes). jansson allocates the text
 * with no heap current: jfree gives it back where it came from. */
static void json_text(json_t *j, char *out, size_t n) {
  char *s = json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT);
  snprintf(out, n, "%s", s ? s : "?");
  jfree(s);
}

/* check() calls inside each other at most, values, $refs, not and the
 * combinators together: bounds the C stack whatever the schema. */
#define CHECK_FRAMES 512
/* The running call's budget is looked at every this many steps (check()
 * calls, and keys of the objects walked), and at every step once the
 * call was stopped (ludo__state_stopped: one step may walk a hollow
 * table). */
#define CHECK_POLL 1024u

/* Counts a step; 1 when the running call's budget ran out (now or
 * before): everything then stops, and the caller raises. */
static int tick(chk_t *c) {
  if (!c->stopped &&
      (++c->steps % CHECK_POLL == 0 || ludo__state_is_stopped(c->st)) &&
      ludo__state_check(c->L)) {
    lua_pop(c->L, 1); /* raised again by the caller (ludo__schema_stop) */
    c->stopped = 1;
  }
  return c->stopped;
}

static int check(chk_t *c, int idx, const node_t *n);

/* anyOf (need 1, any more allowed), oneOf (exactly 1) and allOf (all):
 * the alternatives are tried in order until the outcome is known, so a
 * recursive schema costs what the value's match needs, not every
 * alternative at every level. */
static int check_combo(chk_t *c, int idx, node_t **list, size_t cnt,
                       const char *kw, size_t need_min, size_t need_max) {
  size_t i, passed = 0;
  int quiet = c->quiet;
  c->quiet = 1;
  for (i = 0; i < cnt; i++) {
    if (check(c, idx, list[i])) {
      if (++passed > need_max || (need_max == cnt && passed >= need_min))
        break; /* anyOf matched, or oneOf matched twice */
    } else if (need_min == cnt) {
      break; /* allOf failed */
    }
  }
  c->quiet = quiet;
  if (passed >= need_min && passed <= need_max) return 1;
  if (need_min == cnt && cnt > 1)
    return fail(c, "does not match %s (alternative %zu of %zu does not)",
                kw, i + 1, cnt);
  if (passed > need_max)
    return fail(c, "does not match %s (more than %zu of %zu alternatives "
                "matched)", kw, need_max, cnt);
  return fail(c, "does not match %s (%zu of %zu alternatives matched)", kw,
              passed, cnt);
}

/* multipleOf: the quotient is a whole number, up to the rounding of
 * doubles (0.3 / 0.1 is 2.9999999999999996). */
static int is_multiple(double d, double m) {
  double q = d / m, r = nearbyint(q);
  return isfinite(q) && fabs(q - r) <= 1e-9 * (fabs(q) > 1 ? fabs(q) : 1);
}

/* The number of keys of the table at idx that the check does not leave
 * out. */
static long count_keys(chk_t *c, int idx) {
  long k = 0;
  unsigned int pos = 0;
  lua_pushnil(c->L);
  while (ludo__walk_next(c->L, idx, &pos)) {
    size_t klen;
    if (tick(c)) {
      lua_pop(c->L, 2);
      return 0;
    }
    const char *key = lua_type(c->L, -2) == LUA_TSTRING
                          ? lua_tolstring(c->L, -2, &klen) : NULL;
    if (key == NULL || !skipped(c, key, klen)) k++;
    lua_pop(c->L, 1);
  }
  return k;
}

/* pattern, multipleOf, minProperties, maxProperties, not and $ref. */
static int check_more(chk_t *c, int idx, unsigned t, const node_t *n) {
  lua_State *L = c->L;
  if (n->pattern != NULL && t == T_STRING) {
    /* The match asks the call's budget as it goes (a client's string
     * sets its cost: base/regex.h). */
    ludo__regex_limits_t lim = {1000000, 10000, 4096, ludo__state_stop,
                                NULL, ludo__state_stopped_ud};
    size_t len;
    const char *s = lua_tolstring(L, idx, &len);
    int rc;
    lim.stop_ud = L;
    rc = ludo__regex_exec(n->pattern, s, len, 0, 0, &lim);
    if (rc == LUDO_RE_ERR_STOPPED) {
      c->stopped = 1; /* raised by the caller (ludo__schema_stop) */
      return 0;
    }
    if (rc == 0) return fail(c, "does not match the pattern");
    if (rc < 0) {
      char why[96];
      return fail(c, "cannot be matched against the pattern: %s",
                  ludo__regex_strerror(rc, why, sizeof why));
    }
  }
  if (n->multiple > 0 && (t & (T_NUMBER | T_INTEGER)) &&
      !is_multiple(lua_tonumber(L, idx), n->multiple))
    return fail(c, "must be a multiple of %g, got %g", n->multiple,
                lua_tonumber(L, idx));
  if ((n->min_props >= 0 || n->max_props >= 0) && (t & T_OBJECT) &&
      lua_type(L, idx) == LUA_TTABLE) {
    long k = count_keys(c, idx);
    if (n->min_props >= 0 && k < n->min_props)
      return fail(c, "must have >= %ld fields, got %ld", n->min_props, k);
    if (n->max_props >= 0 && k > n->max_props)
      return fail(c, "must have <= %ld fields, got %ld", n->max_props, k);
  }
  if (n->not_ != NULL) {
    int quiet = c->quiet, ok;
    c->quiet = 1;
    ok = check(c, idx, n->not_);
    c->quiet = quiet;
    if (ok) return fail(c, "matches the schema of 'not'");
  }
  if (n->ref != NULL) {
    int ok;
    if (c->hops >= 4 * CHECK_DEPTH)
      return fail_limit(c, "the schema's $refs loop");
    c->hops++;
    ok = check(c, idx, n->ref);
    c->hops--;
    if (!ok) return 0;
  }
  return 1;
}

/* 1 when the table at idx, taken for an array (t[1] is set), also has a
 * key that is not a positive integer: neither an array nor an object.
 * Asked only to word an error. [-0, +0, -] */
static int mixes_keys(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    int bad = !lua_isinteger(L, -2) || lua_tointeger(L, -2) < 1;
    lua_pop(L, 1);
    if (bad) {
      lua_pop(L, 1);
      return 1;
    }
  }
  return 0;
}

static int check_node(chk_t *c, int idx, const node_t *n) {
  lua_State *L = c->L;
  unsigned t;
  int plain = 0; /* a table without a metatable */
  if (n->never) return fail(c, "not allowed (the schema is false)");
  t = lua_json_type(L, idx, &plain);
  if (n->types != 0 && !(n->types & t)) {
    char want[96];
    types_text(n->types, want, sizeof want);
    return fail(c, "expected %s, got %s", want,
                t == T_ARRAY && lua_istable(L, idx) && mixes_keys(L, idx)
                    ? "a table that mixes array items and keys"
                    : type_name(t));
  }
  if (n->enum_ != NULL) {
    size_t i;
    int found = 0;
    for (i = 0; !found && i < json_array_size(n->enum_); i++)
      found = equals_json(L, idx, json_array_get(n->enum_, i));
    if (!found) {
      char allowed[256];
      json_text(n->enum_, allowed, sizeof allowed);
      return fail(c, "expected one of %s", allowed);
    }
  }
  if (n->const_ != NULL && !equals_json(L, idx, n->const_)) {
    char want[128];
    json_text(n->const_, want, sizeof want);
    return fail(c, "expected %s", want);
  }
  if (t & (T_NUMBER | T_INTEGER)) {
    double d = lua_tonumber(L, idx);
    char lim[32], got[32];
    const char *op = NULL;
    double bound = 0;
    if (n->has_min && !(d >= n->min)) op = ">=", bound = n->min;
    else if (n->has_max && !(d <= n->max)) op = "<=", bound = n->max;
    else if (n->has_xmin && !(d > n->xmin)) op = ">", bound = n->xmin;
    else if (n->has_xmax && !(d < n->xmax)) op = "<", bound = n->xmax;
    if (op != NULL) {
      ludo__real_text(bound, lim, sizeof lim);
      if (lua_isinteger(L, idx))
        snprintf(got, sizeof got, "%lld", (long long)lua_tointeger(L, idx));
      else
        ludo__real_text(d, got, sizeof got);
      return fail(c, "must be %s %s, got %s", op, lim, got);
    }
  }
  if (t == T_STRING && (n->min_len >= 0 || n->max_len >= 0)) {
    size_t len;
    const char *s = lua_tolstring(L, idx, &len);
    long chars = (long)ludo__utf8_chars(s, len);
    if (n->min_len >= 0 && chars < n->min_len)
      return fail(c, "length must be >= %ld, got %ld", n->min_len, chars);
    if (n->max_len >= 0 && chars > n->max_len)
      return fail(c, "length must be <= %ld, got %ld", n->max_len, chars);
  }
  if (t & T_ARRAY) {
    lua_Integer i, len = (lua_Integer)lua_rawlen(L, idx);
    if (n->min_items >= 0 && len < n->min_items)
      return fail(c, "must have >= %ld items, got %lld", n->min_items,
                  (long long)len);
    if (n->max_items >= 0 && len > n->max_items)
      return fail(c, "must have <= %ld items, got %lld", n->max_items,
                  (long long)len);
    if (n->items != NULL && len > 0 &&
        (c->depth >= CHECK_DEPTH || !lua_checkstack(L, 4)))
      return too_deep(c);
    if (n->items != NULL) {
      for (i = 1; i <= len; i++) {
        int ok;
        c->path[c->depth].key = NULL;
        c->path[c->depth].index = i - 1;
        c->depth++;
        lua_rawgeti(L, idx, i);
        ok = check(c, lua_gettop(L), n->items);
        lua_pop(L, 1);
        c->depth--;
        if (!ok) return 0;
      }
    }
  }
  /* (T_OBJECT is only ever the type of a table) */
  if ((t & T_OBJECT) && n->has_object_rules &&
      (c->depth >= CHECK_DEPTH || !lua_checkstack(L, 6)))
    return too_deep(c);
  if ((t & T_OBJECT) && n->has_object_rules) {
    size_t i;
    unsigned int pos = 0;
    for (i = 0; i < n->nrequired; i++) {
      const prop_t *r = &n->required[i];
      int missing;
      /* Without a metatable lua_getfield is a raw get, and it finds the
       * name's string through the API's cache instead of interning it */
      if (plain) {
        missing = lua_getfield(L, idx, r->name) == LUA_TNIL;
      } else {
        lua_pushstring(L, r->name); /* (the API's cache too) */
        missing = lua_rawget(L, idx) == LUA_TNIL;
      }
      missing = missing || skipped(c, r->name, r->len);
      lua_pop(L, 1);
      if (missing)
        return fail(c, "missing required field '%s'", r->name);
    }
    lua_pushnil(L);
    while (ludo__walk_next(L, idx, &pos)) {
      size_t klen;
      const char *k;
      const node_t *sub = NULL;
      int ok = 1;
      if (tick(c)) {
        lua_pop(L, 2);
        return 0;
      }
      if (lua_type(L, -2) != LUA_TSTRING) {
        lua_pop(L, 2);
        return fail(c, "object keys must be strings");
      }
      k = lua_tolstring(L, -2, &klen);
      if (skipped(c, k, klen)) {
        lua_pop(L, 1);
        continue;
      }
      for (i = 0; i < n->nprops; i++) {
        if (n->props[i].len == klen && memcmp(n->props[i].name, k, klen) == 0) {
          sub = n->props[i].schema;
          break;
        }
      }
      if (sub == NULL && n->additional == 0) {
        char key[80];
        snprintf(key, sizeof key, "%.*s", (int)(klen > 64 ? 64 : klen), k);
        lua_pop(L, 2);
        return fail(c, "unknown field '%s'", key);
      }
      if (sub == NULL && n->additional == 2) sub = n->additional_schema;
      if (sub != NULL) {
        c->path[c->depth].key = k;
        c->path[c->depth].klen = klen;
        c->depth++;
        ok = check(c, lua_gettop(L), sub);
        c->depth--;
      }
      lua_pop(L, 1);
      if (!ok) {
        lua_pop(L, 1);
        return 0;
      }
    }
  }
  if (!check_more(c, idx, t, n)) return 0;
  if (n->nany && !check_combo(c, idx, n->any, n->nany, "anyOf", 1, n->nany))
    return 0;
  if (n->none && !check_combo(c, idx, n->one, n->none, "oneOf", 1, 1))
    return 0;
  if (n->nall &&
      !check_combo(c, idx, n->all, n->nall, "allOf", n->nall, n->nall))
    return 0;
  return 1;
}

/* Outcomes of quiet checks of a table against a schema node are
 * remembered once a check has taken this many steps (an ordinary check
 * never gets there and allocates nothing), so that a recursive schema
 * tried many ways over the same value (an anyOf of node kinds at every
 * level) checks each (node, table, depth) once: polynomial, not
 * exponential. Only quiet outcomes are kept (they write no message), and
 * only those no limit cut short. */
#define MEMO_AFTER 4096u
#define MEMO_SLOTS 4096u /* a power of two */
#define MEMO_PROBE 8

typedef struct memo_s {
  const node_t *n; /* NULL: empty */
  const void *v;
  int depth, ok;
} memo_t;

/* The slot of (n, v, depth): the one holding it, else an empty one near
 * its hash, else NULL. */
static memo_t *memo_find(chk_t *c, const node_t *n, const void *v) {
  uintptr_t h = ((uintptr_t)n >> 4) * 0x9E3779B1u ^
                ((uintptr_t)v >> 4) * 0x85EBCA77u ^ (uintptr_t)c->depth;
  unsigned i;
  for (i = 0; i < MEMO_PROBE; i++) {
    memo_t *m = &c->memo[(h + i) & (MEMO_SLOTS - 1)];
    if (m->n == NULL || (m->n == n && m->v == v && m->depth == c->depth))
      return m;
  }
  return NULL;
}

/* The slot for a check of the table at idx against n, or NULL when
 * outcomes are not remembered here. */
static memo_t *memo_slot(chk_t *c, int idx, const node_t *n) {
  if (!c->quiet || c->steps < MEMO_AFTER ||
      lua_type(c->L, idx) != LUA_TTABLE)
    return NULL;
  if (c->memo == NULL) {
    void *ud;
    lua_Alloc fn = lua_getallocf(c->L, &ud);
    c->memo = fn(ud, NULL, 0, MEMO_SLOTS * sizeof(memo_t));
    if (c->memo == NULL) return NULL; /* at the cap: checked as it is */
    memset(c->memo, 0, MEMO_SLOTS * sizeof(memo_t));
  }
  return memo_find(c, n, lua_topointer(c->L, idx));
}

static void memo_free(chk_t *c) {
  void *ud;
  lua_Alloc fn;
  if (c->memo == NULL) return;
  fn = lua_getallocf(c->L, &ud);
  fn(ud, c->memo, MEMO_SLOTS * sizeof(memo_t), 0);
  c->memo = NULL;
}

static int check(chk_t *c, int idx, const node_t *n) {
  int ok;
  memo_t *m;
  if (c->hard || tick(c)) return 0;
  if (c->frames >= CHECK_FRAMES)
    return fail_limit(c, "the schema nests more than %d checks deep here",
                      CHECK_FRAMES);
  m = memo_slot(c, idx, n);
  if (m != NULL && m->n == n) return m->ok;
  c->frames++;
  ok = check_node(c, idx, n) && !c->hard && !c->stopped;
  c->frames--;
  if (m != NULL && !c->hard && !c->stopped) {
    /* (the slot may have been taken meanwhile: ours is as good) */
    m->n = n;
    m->v = lua_topointer(c->L, idx);
    m->depth = c->depth;
    m->ok = ok;
  }
  return ok;
}

int ludo__schema_check_except(lua_State *L, int idx,
                              const ludo__schema_t *s, const char *root,
                              const char *const *skip, ludo__buf_t *msg) {
  chk_t c;
  int ok;
  c.L = L;
  c.st = ludo__state_of(L);
  c.msg = msg;
  c.root = root;
  c.depth = c.quiet = c.hops = c.frames = c.stopped = c.hard = 0;
  c.skip = skip;
  c.steps = 0;
  c.memo = NULL;
  ok = check(&c, lua_absindex(L, idx), s->root);
  memo_free(&c);
  return c.stopped ? -1 : ok;
}

int ludo__schema_stop(lua_State *L) {
  if (!ludo__state_check(L)) /* not reached: the stop stays marked */
    lua_pushliteral(L, "the schema check was stopped");
  return lua_error(L);
}

int ludo__schema_check(lua_State *L, int idx, const ludo__schema_t *s,
                       const char *root, ludo__buf_t *msg) {
  return ludo__schema_check_except(L, idx, s, root, NULL, msg);
}

typedef struct {
  ludo__buf_t b;
} msg_box_t;

/* A validator's upvalue: its schema and root name in one userdata, read
 * with one call. */
typedef struct {
  const ludo__schema_t *s; /* borrowed: outlives the state */
  char root[];             /* NUL-terminated */
} validator_t;

/* validate(value) -> true | false, message */
static int ludo_l_schema_validate(lua_State *L) {
  const validator_t *v = lua_touserdata(L, lua_upvalueindex(1));
  const ludo__schema_t *s = v->s;
  const char *root = v->root;
  ludo__buf_t msg;
  void *ud;
  lua_Alloc fn = lua_getallocf(L, &ud);
  int ok;
  luaL_checkany(L, 1);
  ludo__buf_init(&msg, fn, ud);
  ok = ludo__schema_check(L, 1, s, root, &msg);
  if (ok != 0) {
    ludo__buf_free(&msg);
    if (ok < 0) return ludo__schema_stop(L);
    lua_pushboolean(L, 1);
    return 1;
  }
  lua_pushboolean(L, 0);
  /* Copy out, then free before anything can raise. */
  if (msg.p != NULL) {
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", msg.p);
    ludo__buf_free(&msg);
    lua_pushstring(L, tmp);
  } else {
    lua_pushfstring(L, "%s: does not match the schema", root);
  }
  return 2;
}

void ludo__schema_push_validator(lua_State *L, const ludo__schema_t *s,
                                 const char *root) {
  size_t len = strlen(root);
  validator_t *v = lua_newuserdatauv(L, sizeof *v + len + 1, 0);
  v->s = s;
  memcpy(v->root, root, len + 1);
  lua_pushcclosure(L, ludo_l_schema_validate, 1);
}
