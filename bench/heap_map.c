/* heap_map.c - what an idle session's Lua heap is made of, object by
 * object (docs/performance.md, "Targets: where they stand"):
 *
 *   build/ludo-heap-map [ENV] [-v]
 *
 * Opens two sessions of ENV (default examples/echo; the first is the pool's
 * probe state), resets the second, runs a full collection and walks its
 * state's object list: count and bytes per kind (prototypes, tables,
 * strings, closures, upvalues), the string table, and what the arena
 * holds (chunks, free blocks). -v lists every prototype (source:line, its
 * bytes, code, constants). Reads Lua's internal structures: it is built
 * against the headers of the Lua that ludo links (build-lua, 5.4.4), a
 * measuring tool, not part of the runtime. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env/env.h"
#include "lfunc.h"
#include "lobject.h"
#include "lstate.h"
#include "lstring.h"
#include "ltable.h"
#include "ludo.h"

typedef struct {
  size_t n, bytes;
} tally_t;

static size_t proto_bytes(const Proto *p) {
  return sizeof(Proto) + (size_t)p->sizecode * sizeof(Instruction) +
         (size_t)p->sizek * sizeof(TValue) + (size_t)p->sizep * sizeof(Proto *) +
         (size_t)p->sizeupvalues * sizeof(Upvaldesc) + (size_t)p->sizelineinfo +
         (size_t)p->sizeabslineinfo * sizeof(AbsLineInfo) +
         (size_t)p->sizelocvars * sizeof(LocVar);
}

static size_t table_bytes(Table *h) {
  return sizeof(Table) + sizeof(TValue) * luaH_realasize(h) +
         (isdummy(h) ? 0 : sizeof(Node) * sizenode(h));
}

/* Bytes of x by Lua's own size formulas (0 for threads and userdata,
 * counted apart). */
static size_t object_bytes(GCObject *x, int verbose) {
  switch (x->tt) {
    case LUA_VPROTO: {
      Proto *p = gco2p(x);
      if (verbose)
        printf("  proto %6zu B  %s:%d  code %d  constants %d\n",
               proto_bytes(p), p->source ? getstr(p->source) : "?",
               p->linedefined, p->sizecode, p->sizek);
      return proto_bytes(p);
    }
    case LUA_VLCL: return sizeLclosure(gco2lcl(x)->nupvalues);
    case LUA_VCCL: return sizeCclosure(gco2ccl(x)->nupvalues);
    case LUA_VSHRSTR: return sizelstring(gco2ts(x)->shrlen);
    case LUA_VLNGSTR: return sizelstring(gco2ts(x)->u.lnglen);
    case LUA_VTABLE: return table_bytes(gco2t(x));
    case LUA_VUPVAL: return sizeof(UpVal);
    default: return 0;
  }
}

static const char *kind_name(int tt) {
  switch (tt) {
    case LUA_VPROTO: return "prototypes";
    case LUA_VLCL: return "Lua closures";
    case LUA_VCCL: return "C closures";
    case LUA_VSHRSTR: return "short strings";
    case LUA_VLNGSTR: return "long strings";
    case LUA_VTABLE: return "tables";
    case LUA_VUPVAL: return "upvalues";
    case LUA_VTHREAD: return "threads";
    case LUA_VUSERDATA: return "userdata";
    default: return "other";
  }
}

static void arena_report(const ludo__arena_t *a) {
  size_t free_bytes = 0;
  int c;
  for (c = 0; c < LUDO__ARENA_CLASSES; c++) {
    void *p;
    for (p = a->free[c]; p != NULL; p = *(void **)p)
      free_bytes += (size_t)(c + 1) << 4;
  }
  printf("arena: chunks %zu B, of which free blocks %zu B\n", a->held,
         free_bytes);
}

int main(int argc, char **argv) {
  const char *path = argc > 1 && argv[1][0] != '-' ? argv[1] : "examples/echo";
  int verbose = argc > 1 && strcmp(argv[argc - 1], "-v") == 0, rc, tt;
  ludo_runtime_t *rt;
  ludo_env_t *env;
  ludo_session_t *probe, *s;
  const char *out;
  size_t len, total = 0;
  tally_t by[64] = {{0, 0}};
  GCObject *x;
  lua_State *L;
  if ((rc = ludo_runtime_new(&rt, NULL)) != 0 ||
      (rc = ludo_env_load(rt, path, NULL, &env)) != 0 ||
      (rc = ludo_session_open(env, &probe)) != 0 ||
      (rc = ludo_session_open(env, &s)) != 0 ||
      (rc = ludo_session_reset(s, "{}", 2, &out, &len)) != 0 ||
      (rc = ludo_session_collect(s)) != 0) {
    fprintf(stderr, "heap_map: %s: %s\n", path, ludo_runtime_errmsg(rt));
    return 1;
  }
  L = s->ps->st.L;
  /* Lua 5.4 links every collectable object, strings too, in allgc (and
   * finobj / fixedgc). */
  for (tt = 0; tt < 3; tt++) {
    GCObject *list = tt == 0 ? G(L)->allgc : tt == 1 ? G(L)->finobj
                                                     : G(L)->fixedgc;
    for (x = list; x != NULL; x = x->next) {
      size_t b = object_bytes(x, verbose);
      by[x->tt & 0x3f].n++;
      by[x->tt & 0x3f].bytes += b;
      total += b;
    }
  }
  for (tt = 0; tt < 64; tt++)
    if (by[tt].n > 0)
      printf("%-14s %5zu objects %7zu B\n", kind_name(tt), by[tt].n,
             by[tt].bytes);
  printf("string table   %5d buckets %7zu B\n", G(L)->strt.size,
         (size_t)G(L)->strt.size * sizeof(TString *));
  printf("counted %zu B (threads' stacks apart); the state's Lua memory "
         "%zu B\n", total + (size_t)G(L)->strt.size * sizeof(TString *),
         ludo_session_memory(s));
  arena_report(&s->ps->st.arena);
  ludo_runtime_free(rt);
  return 0;
}
