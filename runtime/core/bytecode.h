/* bytecode.h - trims the debug information of Lua 5.4 binary chunks.
 *
 * lua_dump keeps all of a function's debug information or none of it.
 * ludo wants the part that makes errors say where they happened (the
 * source name and the line of every instruction) without the part that
 * only names variables in messages (local variable names and scopes,
 * upvalue names), which is most of the memory debug information costs a
 * session state. This rewrites a chunk dumped with its debug information,
 * dropping what is not asked for. */
#ifndef LUDO_CORE_BYTECODE_H
#define LUDO_CORE_BYTECODE_H

#include <stddef.h>

#include "base/buf.h"

/* What to keep besides source names and line information. */
enum {
  LUDO__BC_LOCALS = 1,   /* local variable names and their pc ranges */
  LUDO__BC_UPNAMES = 2   /* upvalue names */
};

/* Appends to `out` the chunk `bc` (`n` bytes written by lua_dump of the
 * Lua this library is built with, strip = 0) with its debug information
 * reduced to source names, line information and the parts named in
 * `keep` (LUDO__BC_*). Reads nothing past bc + n. Returns 0, LUDO_ENOMEM
 * when `out` cannot grow, or LUDO_EINVAL when `bc` is not a chunk in this
 * Lua's format (out then holds a partial copy: reset it). */
int ludo__bytecode_trim(const char *bc, size_t n, unsigned keep,
                        ludo__buf_t *out);

#endif
