/* regex.h - a thin layer over pcre2 (8-bit code units): flag parsing,
 * compilation with JIT when available, matching into a per-regex match-data
 * block under explicit limits, and error text. Every pcre2 allocation goes
 * through a lua_Alloc-shaped function given by the caller; nothing here
 * raises or touches a lua_State. */
#ifndef LUDO_BASE_REGEX_H
#define LUDO_BASE_REGEX_H

#include <stddef.h>
#include <stdint.h>

#include "ludo_defs.h"

/* Compile options, a bit set built by ludo__regex_flags(). */
#define LUDO_RE_CASELESS 0x001u       /* "i" */
#define LUDO_RE_MULTILINE 0x002u      /* "m" */
#define LUDO_RE_DOTALL 0x004u         /* "s" */
#define LUDO_RE_EXTENDED 0x008u       /* "x" */
#define LUDO_RE_UTF 0x010u            /* "u", on unless "b" is given */
#define LUDO_RE_ANCHORED 0x020u       /* "a" */
#define LUDO_RE_DOLLAR_ENDONLY 0x040u /* "D" */
#define LUDO_RE_UNGREEDY 0x080u       /* "U" */

/* Options of one ludo__regex_exec() call. */
#define LUDO_RE_EXEC_NOTEMPTY_ATSTART 0x1u /* no empty match at `off` */
#define LUDO_RE_EXEC_ANCHORED 0x2u         /* match must start at `off` */
#define LUDO_RE_EXEC_NO_UTF_CHECK 0x4u     /* subject already validated */

/* ludo__regex_flags() results besides 0. */
#define LUDO_RE_FLAG_UNKNOWN (-1)  /* *bad holds the unknown character */
#define LUDO_RE_FLAG_CONFLICT (-2) /* "u" and "b" were both given */

/* Limits applied to each ludo__regex_exec() call. The JIT honours `match`
 * only; `depth` and `heap_kib` bound the interpreter's backtracking. */
typedef struct ludo__regex_limits_s {
  uint32_t match;    /* pcre2 match limit (backtracking steps) */
  uint32_t depth;    /* pcre2 depth limit (nested backtracking points) */
  uint32_t heap_kib; /* pcre2 heap limit for backtracking frames, KiB */
  /* Asked now and then during a match: at every 16th start position the
   * match tries (pcre2's match limit counts each start position afresh,
   * so it bounds no search), and every 16th item of a pattern with
   * back-references (whose steps each compare up to the subject's length).
   * Nonzero stops the match with LUDO_RE_ERR_STOPPED. NULL: never asked.
   * Must not raise or longjmp. */
  int (*stop)(void *ud);
  void *stop_ud;
  /* Asked at every one of those places when not NULL: a cheap test (no
   * clock) that the caller already stopped, so one costly start position
   * is all a stopped search runs on. Same rules as `stop`. */
  int (*stopped)(void *ud);
} ludo__regex_limits_t;

/* A compiled pattern. The caller provides the storage (for instance inside
 * a Lua userdata) and must not move it between ludo__regex_compile() and
 * ludo__regex_free(): pcre2 keeps its address to reach `fn`/`ud`. Fields
 * are read-only for callers. */
typedef struct ludo__regex_s {
  ludo_alloc_fn fn; /* allocator of every pcre2 block below */
  void *ud;
  struct pcre2_real_code_8 *code;             /* NULL when not compiled */
  struct pcre2_real_match_data_8 *md;         /* ovector of the last exec */
  struct pcre2_real_match_context_8 *mctx;    /* limits of the last exec */
  const unsigned char *name_table;            /* borrowed from `code` */
  uint32_t name_count, name_entry_size;
  uint32_t ngroups;  /* capture groups, not counting group 0 */
  uint32_t opts;     /* LUDO_RE_* options it was compiled with */
  unsigned utf : 1;  /* UTF mode (from the flags or a (*UTF) verb) */
  unsigned crlf : 1; /* CRLF is a newline, so empty matches skip "\r\n" */
  unsigned jit : 1;  /* JIT-compiled */
  unsigned backrefs : 1; /* has back-references: a callout at each item */
} ludo__regex_t;

/* Parses a flag string of `n` bytes ("imsxuaDUb", plus "o" and "j" which
 * are accepted and ignored) into LUDO_RE_* options in *opts. UTF is on
 * unless "b" is given. Returns 0, LUDO_RE_FLAG_UNKNOWN with the character
 * in *bad, or LUDO_RE_FLAG_CONFLICT. */
int ludo__regex_flags(const char *s, size_t n, uint32_t *opts, char *bad);

/* Compiles `pat` (`len` bytes, copied by pcre2) with LUDO_RE_* `opts` into
 * `re`, then JIT-compiles it when the JIT is available (a JIT failure is
 * silent: the interpreter is used). Every block is allocated with `fn`/`ud`
 * (lua_Alloc contract) and freed by ludo__regex_free().
 * Returns 0; LUDO_EINVAL for a bad pattern, with "<message> at offset N" in
 * `err` (NUL-terminated, truncated to `errlen`); LUDO_ENOMEM when `fn`
 * refused. On failure `re` holds nothing and needs no ludo__regex_free(). */
int ludo__regex_compile(ludo__regex_t *re, const char *pat, size_t len,
                        uint32_t opts, ludo_alloc_fn fn, void *ud, char *err,
                        size_t errlen);

/* Frees everything `re` holds and zeroes it. Accepts a zeroed or already
 * freed `re`. */
void ludo__regex_free(ludo__regex_t *re);

/* Matches `re` against subject `s` (`len` bytes, borrowed for the call)
 * starting at byte offset `off`, with LUDO_RE_EXEC_* `flags` and limits
 * `lim`. Returns the number of pairs set (>= 1) on a match, 0 when there is
 * no match, or a negative pcre2 error code (ludo__regex_strerror()). A JIT
 * stack overflow is retried in the interpreter. The result is read with
 * ludo__regex_ovector() and stays valid until the next exec on `re`. */
int ludo__regex_exec(ludo__regex_t *re, const char *s, size_t len,
                     size_t off, uint32_t flags,
                     const ludo__regex_limits_t *lim);

/* The ovector of the last match: 2 * (ngroups + 1) offsets, start/end byte
 * pairs; unset groups hold LUDO_RE_UNSET. Borrowed until the next exec. */
const size_t *ludo__regex_ovector(const ludo__regex_t *re);
#define LUDO_RE_UNSET (~(size_t)0)

/* After a UTF error from ludo__regex_exec(), the offset of the bad byte. */
size_t ludo__regex_bad_offset(const ludo__regex_t *re);

/* The offset after the character at `pos` in `s` (`len` bytes): one byte,
 * a whole UTF-8 sequence in UTF mode, or "\r\n" when CRLF is a newline.
 * Used to step past an empty match. */
size_t ludo__regex_advance(const ludo__regex_t *re, const char *s,
                           size_t len, size_t pos);

/* Named group `i` (0 <= i < re->name_count), in name order (duplicate names,
 * allowed by (?J), are adjacent in group order). Returns the name
 * (NUL-terminated, borrowed from `re`) and stores its group in *group. */
const char *ludo__regex_name(const ludo__regex_t *re, uint32_t i,
                             uint32_t *group);

/* Bytes pcre2 holds for `re` (compiled pattern plus JIT code), for callers
 * that report external memory to a garbage collector. */
size_t ludo__regex_size(const ludo__regex_t *re);

/* Bytes of JIT code of the pattern (mapped by pcre2 itself, outside the
 * allocator), or 0 when it is not JIT-compiled. */
size_t ludo__regex_jit_size(const ludo__regex_t *re);

/* Writes pcre2's text for error code `code` into `buf` (`n` bytes,
 * NUL-terminated). Returns `buf`. */
char *ludo__regex_strerror(int code, char *buf, size_t n);

/* Returns 1 when this pcre2 build has a working JIT compiler. */
int ludo__regex_jit_available(void);

/* Classifiers for ludo__regex_exec() errors. */
int ludo__regex_is_utf_error(int code);
#define LUDO_RE_ERR_MATCHLIMIT (-47)   /* PCRE2_ERROR_MATCHLIMIT */
#define LUDO_RE_ERR_DEPTHLIMIT (-53)   /* PCRE2_ERROR_DEPTHLIMIT */
#define LUDO_RE_ERR_HEAPLIMIT (-63)    /* PCRE2_ERROR_HEAPLIMIT */
#define LUDO_RE_ERR_NOMEMORY (-48)     /* PCRE2_ERROR_NOMEMORY */
#define LUDO_RE_ERR_BADUTFOFFSET (-36) /* PCRE2_ERROR_BADUTFOFFSET */
#define LUDO_RE_ERR_STOPPED (-37)      /* PCRE2_ERROR_CALLOUT: lim->stop */

#endif
