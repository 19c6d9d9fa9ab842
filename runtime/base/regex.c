/* regex.c - pcre2 (8-bit) compile, JIT, match and error text on a
 * caller-given lua_Alloc-shaped allocator. */
#include "base/regex.h"

#include <stdio.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

_Static_assert(LUDO_RE_ERR_MATCHLIMIT == PCRE2_ERROR_MATCHLIMIT, "pcre2");
_Static_assert(LUDO_RE_ERR_DEPTHLIMIT == PCRE2_ERROR_DEPTHLIMIT, "pcre2");
_Static_assert(LUDO_RE_ERR_HEAPLIMIT == PCRE2_ERROR_HEAPLIMIT, "pcre2");
_Static_assert(LUDO_RE_ERR_NOMEMORY == PCRE2_ERROR_NOMEMORY, "pcre2");
_Static_assert(LUDO_RE_ERR_BADUTFOFFSET == PCRE2_ERROR_BADUTFOFFSET,
               "pcre2");
_Static_assert(LUDO_RE_UNSET == PCRE2_UNSET, "pcre2");
_Static_assert(LUDO_RE_ERR_STOPPED == PCRE2_ERROR_CALLOUT, "pcre2");

/* How many callouts pass between two questions to lim->stop (lim->stopped
 * is asked at each). Every pattern has a callout first, so one comes at
 * each start position the match tries, each bounded by the match limit;
 * a pattern with back-references has one before each item, and between
 * two of them the match does at most one item's work (a back-reference
 * compares up to the subject's length). */
#define STOP_EVERY 16

/* The callout put first in every pattern. */
static const char first_callout[] = "(?C255)";

/* The options that only open a pattern, (*UTF) (*LIMIT_MATCH=9) ...: the
 * first callout goes after them. Backtracking verbs such as (*FAIL) and
 * (*ACCEPT) are not among them: a callout after those could be skipped. */
static int is_start_option(const char *s, size_t n) {
  static const char *const names[] = {
      "UTF", "UCP", "NOTEMPTY", "NOTEMPTY_ATSTART", "NO_AUTO_POSSESS",
      "NO_DOTSTAR_ANCHOR", "NO_JIT", "NO_START_OPT", "CR", "LF", "CRLF",
      "ANYCRLF", "ANY", "NUL", "BSR_ANYCRLF", "BSR_UNICODE", NULL};
  static const char *const limits[] = {"LIMIT_HEAP=", "LIMIT_MATCH=",
                                       "LIMIT_DEPTH=", "LIMIT_RECURSION=",
                                       NULL};
  size_t i, k;
  for (i = 0; names[i] != NULL; i++)
    if (strlen(names[i]) == n && memcmp(names[i], s, n) == 0) return 1;
  for (i = 0; limits[i] != NULL; i++) {
    k = strlen(limits[i]);
    if (n > k && memcmp(limits[i], s, k) == 0 &&
        strspn(s + k, "0123456789") == n - k)
      return 1;
  }
  return 0;
}

/* Where the first callout goes in pat: after its start options. */
static size_t after_start_options(const char *pat, size_t len) {
  size_t i = 0;
  while (i + 2 < len && pat[i] == '(' && pat[i + 1] == '*') {
    const char *close = memchr(pat + i + 2, ')', len - i - 2);
    if (close == NULL || !is_start_option(pat + i + 2,
                                          (size_t)(close - pat - i - 2)))
      break;
    i = (size_t)(close - pat) + 1;
  }
  return i;
}

/* Compiles pat with first_callout after its start options. */
static pcre2_code *compile_with_first_callout(ludo__regex_t *re,
                                              const char *pat, size_t len,
                                              uint32_t o, int *errcode,
                                              PCRE2_SIZE *erroff,
                                              pcre2_compile_context *cctx) {
  size_t at = after_start_options(pat, len), k = sizeof first_callout - 1;
  char *text = re->fn(re->ud, NULL, 0, len + k);
  pcre2_code *code;
  if (text == NULL) {
    *errcode = PCRE2_ERROR_HEAP_FAILED;
    return NULL;
  }
  memcpy(text, pat, at);
  memcpy(text + at, first_callout, k);
  memcpy(text + at + k, pat + at, len - at);
  code = pcre2_compile((PCRE2_SPTR)text, len + k, o, errcode, erroff, cctx);
  re->fn(re->ud, text, len + k, 0);
  return code;
}

/* pcre2's free() gets no size but lua_Alloc needs one, so every block
 * starts with a header holding its size, padded to keep the payload
 * maximally aligned. */
typedef union ludo__regex_hdr_u {
  size_t size;
  max_align_t align;
} ludo__regex_hdr_t;

/* pcre2 private_malloc: `data` is the ludo__regex_t being compiled. */
static void *ludo__regex_malloc(size_t n, void *data) {
  ludo__regex_t *re = data;
  ludo__regex_hdr_t *h;
  if (n > (size_t)-1 - sizeof(*h)) return NULL;
  h = re->fn(re->ud, NULL, 0, sizeof(*h) + n);
  if (h == NULL) return NULL;
  h->size = n;
  return h + 1;
}

/* pcre2 private_free: gives the block back with the size it was asked. */
static void ludo__regex_mfree(void *p, void *data) {
  ludo__regex_t *re = data;
  ludo__regex_hdr_t *h;
  if (p == NULL) return;
  h = (ludo__regex_hdr_t *)p - 1;
  re->fn(re->ud, h, sizeof(*h) + h->size, 0);
}

int ludo__regex_flags(const char *s, size_t n, uint32_t *opts, char *bad) {
  uint32_t o = LUDO_RE_UTF;
  int u = 0, b = 0;
  size_t i;
  for (i = 0; i < n; i++) {
    switch (s[i]) {
      case 'i': o |= LUDO_RE_CASELESS; break;
      case 'm': o |= LUDO_RE_MULTILINE; break;
      case 's': o |= LUDO_RE_DOTALL; break;
      case 'x': o |= LUDO_RE_EXTENDED; break;
      case 'a': o |= LUDO_RE_ANCHORED; break;
      case 'D': o |= LUDO_RE_DOLLAR_ENDONLY; break;
      case 'U': o |= LUDO_RE_UNGREEDY; break;
      case 'u': u = 1; break;
      case 'b': b = 1; break;
      case 'o': /* OpenResty "compile once": every pattern is cached */
      case 'j': /* OpenResty "JIT": on whenever available */
        break;
      default:
        if (bad) *bad = s[i];
        return LUDO_RE_FLAG_UNKNOWN;
    }
  }
  if (u && b) return LUDO_RE_FLAG_CONFLICT;
  if (b) o &= ~LUDO_RE_UTF;
  *opts = o;
  return 0;
}

/* Maps LUDO_RE_* options to pcre2 compile options. Bytes mode also forbids
 * a (*UTF) verb, and UTF mode forbids \C, so that match ends are always
 * character boundaries and later calls may skip the UTF check. */
static uint32_t ludo__regex_pcre2_opts(uint32_t opts) {
  uint32_t o = 0;
  if (opts & LUDO_RE_CASELESS) o |= PCRE2_CASELESS;
  if (opts & LUDO_RE_MULTILINE) o |= PCRE2_MULTILINE;
  if (opts & LUDO_RE_DOTALL) o |= PCRE2_DOTALL;
  if (opts & LUDO_RE_EXTENDED) o |= PCRE2_EXTENDED;
  if (opts & LUDO_RE_ANCHORED) o |= PCRE2_ANCHORED;
  if (opts & LUDO_RE_DOLLAR_ENDONLY) o |= PCRE2_DOLLAR_ENDONLY;
  if (opts & LUDO_RE_UNGREEDY) o |= PCRE2_UNGREEDY;
  if (opts & LUDO_RE_UTF)
    o |= PCRE2_UTF | PCRE2_NEVER_BACKSLASH_C;
  else
    o |= PCRE2_NEVER_UTF;
  return o;
}

int ludo__regex_compile(ludo__regex_t *re, const char *pat, size_t len,
                        uint32_t opts, ludo_alloc_fn fn, void *ud, char *err,
                        size_t errlen) {
  pcre2_general_context *gctx;
  pcre2_compile_context *cctx;
  pcre2_code *code;
  int errcode = 0, rc = LUDO_ENOMEM;
  PCRE2_SIZE erroff = 0;
  uint32_t all = 0, nl = 0;
  PCRE2_SPTR table = NULL;

  memset(re, 0, sizeof(*re));
  re->fn = fn;
  re->ud = ud;
  re->opts = opts;
  if (err && errlen) err[0] = '\0';

  /* The contexts live only for this call; the code and match data copy
   * their memory functions, whose data pointer is `re` itself. */
  gctx = pcre2_general_context_create(ludo__regex_malloc, ludo__regex_mfree,
                                      re);
  if (gctx == NULL) goto fail;
  cctx = pcre2_compile_context_create(gctx);
  if (cctx == NULL) goto fail_gctx;
  /* Compiled with callouts, where the match asks lim->stop
   * (ludo__regex_exec). pcre2's match limit counts each start position
   * afresh, so it bounds no search: every pattern gets a callout first,
   * reached at each start position tried (the start-of-match
   * optimisations still skip the others). A back-reference compares up to
   * the subject's length in one step of the match limit ((.*)\1 over 320
   * KB is quadratic in C within one position): such a pattern is compiled
   * again with a callout before each item. A pattern that does not compile
   * is compiled as it is, for the error offset the user's text has. */
  code = compile_with_first_callout(re, pat, len, ludo__regex_pcre2_opts(opts),
                                    &errcode, &erroff, cctx);
  if (code == NULL && errcode != PCRE2_ERROR_HEAP_FAILED)
    code = pcre2_compile((PCRE2_SPTR)pat, len, ludo__regex_pcre2_opts(opts),
                         &errcode, &erroff, cctx);
  if (code != NULL) {
    uint32_t backref = 0;
    pcre2_pattern_info(code, PCRE2_INFO_BACKREFMAX, &backref);
    if (backref > 0) {
      pcre2_code_free(code);
      code = pcre2_compile((PCRE2_SPTR)pat, len,
                           ludo__regex_pcre2_opts(opts) | PCRE2_AUTO_CALLOUT,
                           &errcode, &erroff, cctx);
      re->backrefs = 1;
    }
  }
  pcre2_compile_context_free(cctx);
  if (code == NULL) {
    if (errcode != PCRE2_ERROR_HEAP_FAILED) {
      char msg[256];
      ludo__regex_strerror(errcode, msg, sizeof(msg));
      if (err && errlen)
        snprintf(err, errlen, "%s at offset %zu", msg, (size_t)erroff);
      rc = LUDO_EINVAL;
    }
    goto fail_gctx;
  }
  re->code = code;
  re->mctx = pcre2_match_context_create(gctx);
  pcre2_general_context_free(gctx);
  if (re->mctx == NULL) goto fail_re;
  re->md = pcre2_match_data_create_from_pattern(code, NULL);
  if (re->md == NULL) goto fail_re;

  /* A JIT failure (no JIT support, no memory) leaves the interpreter. */
  re->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;

  pcre2_pattern_info(code, PCRE2_INFO_CAPTURECOUNT, &re->ngroups);
  pcre2_pattern_info(code, PCRE2_INFO_NAMECOUNT, &re->name_count);
  pcre2_pattern_info(code, PCRE2_INFO_NAMEENTRYSIZE, &re->name_entry_size);
  pcre2_pattern_info(code, PCRE2_INFO_NAMETABLE, &table);
  re->name_table = table;
  pcre2_pattern_info(code, PCRE2_INFO_ALLOPTIONS, &all);
  pcre2_pattern_info(code, PCRE2_INFO_NEWLINE, &nl);
  re->utf = (all & PCRE2_UTF) != 0;
  re->crlf = nl == PCRE2_NEWLINE_CRLF || nl == PCRE2_NEWLINE_ANY ||
             nl == PCRE2_NEWLINE_ANYCRLF;
  return 0;

fail_re:
  ludo__regex_free(re);
  return LUDO_ENOMEM;
fail_gctx:
  pcre2_general_context_free(gctx);
fail:
  re->code = NULL;
  return rc;
}

void ludo__regex_free(ludo__regex_t *re) {
  if (re == NULL) return;
  /* Each block is freed through the memory functions it was made with,
   * which read re->fn/ud: clear the struct only afterwards. */
  if (re->md) pcre2_match_data_free(re->md);
  if (re->mctx) pcre2_match_context_free(re->mctx);
  if (re->code) pcre2_code_free(re->code);
  memset(re, 0, sizeof(*re));
}

typedef struct stop_s {
  const ludo__regex_limits_t *lim;
  unsigned calls;
} stop_t;

static int stop_callout(pcre2_callout_block *cb, void *data) {
  stop_t *st = data;
  const ludo__regex_limits_t *lim = st->lim;
  (void)cb;
  if ((lim->stopped != NULL && lim->stopped(lim->stop_ud)) ||
      (++st->calls % STOP_EVERY == 0 && lim->stop(lim->stop_ud)))
    return PCRE2_ERROR_CALLOUT; /* pcre2_match returns it */
  return 0;
}

int ludo__regex_exec(ludo__regex_t *re, const char *s, size_t len,
                     size_t off, uint32_t flags,
                     const ludo__regex_limits_t *lim) {
  uint32_t o = 0;
  stop_t st;
  int rc;
  st.lim = lim;
  st.calls = 0;
  if (lim->stop != NULL)
    pcre2_set_callout(re->mctx, stop_callout, &st);
  else
    pcre2_set_callout(re->mctx, NULL, NULL);
  if (flags & LUDO_RE_EXEC_NOTEMPTY_ATSTART) o |= PCRE2_NOTEMPTY_ATSTART;
  if (flags & LUDO_RE_EXEC_ANCHORED) o |= PCRE2_ANCHORED;
  if (flags & LUDO_RE_EXEC_NO_UTF_CHECK) o |= PCRE2_NO_UTF_CHECK;
  pcre2_set_match_limit(re->mctx, lim->match);
  pcre2_set_depth_limit(re->mctx, lim->depth);
  pcre2_set_heap_limit(re->mctx, lim->heap_kib);
  rc = pcre2_match(re->code, (PCRE2_SPTR)s, len, off, o, re->md, re->mctx);
  /* The JIT runs on a small machine stack; the interpreter keeps its
   * frames on the heap under the depth and heap limits. */
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
    rc = pcre2_match(re->code, (PCRE2_SPTR)s, len, off, o | PCRE2_NO_JIT,
                     re->md, re->mctx);
  if (rc == PCRE2_ERROR_NOMATCH) return 0;
  if (rc == 0) rc = (int)re->ngroups + 1; /* cannot happen: ovector fits */
  return rc;
}

const size_t *ludo__regex_ovector(const ludo__regex_t *re) {
  return pcre2_get_ovector_pointer(re->md);
}

size_t ludo__regex_bad_offset(const ludo__regex_t *re) {
  return pcre2_get_startchar(re->md);
}

size_t ludo__regex_advance(const ludo__regex_t *re, const char *s,
                           size_t len, size_t pos) {
  if (pos >= len) return len;
  if (re->crlf && s[pos] == '\r' && pos + 1 < len && s[pos + 1] == '\n')
    return pos + 2;
  pos++;
  if (re->utf)
    while (pos < len && ((unsigned char)s[pos] & 0xC0) == 0x80) pos++;
  return pos;
}

const char *ludo__regex_name(const ludo__regex_t *re, uint32_t i,
                             uint32_t *group) {
  const unsigned char *e = re->name_table + (size_t)i * re->name_entry_size;
  if (group) *group = ((uint32_t)e[0] << 8) | e[1];
  return (const char *)e + 2;
}

size_t ludo__regex_jit_size(const ludo__regex_t *re) {
  size_t jit = 0;
  if (re->code != NULL && re->jit)
    pcre2_pattern_info(re->code, PCRE2_INFO_JITSIZE, &jit);
  return jit;
}

size_t ludo__regex_size(const ludo__regex_t *re) {
  size_t size = 0;
  if (re->code == NULL) return 0;
  pcre2_pattern_info(re->code, PCRE2_INFO_SIZE, &size);
  return size + ludo__regex_jit_size(re);
}

char *ludo__regex_strerror(int code, char *buf, size_t n) {
  if (n == 0) return buf;
  buf[0] = '\0';
  if (pcre2_get_error_message(code, (PCRE2_UCHAR *)buf, n) < 0 &&
      buf[0] == '\0')
    snprintf(buf, n, "pcre2 error %d", code);
  return buf;
}

int ludo__regex_is_utf_error(int code) {
  return code <= PCRE2_ERROR_UTF8_ERR1 && code >= PCRE2_ERROR_UTF8_ERR21;
}

int ludo__regex_jit_available(void) {
  uint32_t jit = 0;
  if (pcre2_config(PCRE2_CONFIG_JIT, &jit) < 0) return 0;
  return jit != 0;
}
