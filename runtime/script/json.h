/* json.h - JSON <-> Lua values.
 *
 * Decoding runs the streaming parser of base/jsonparse.h and builds Lua
 * values from its callbacks, so every byte is allocated by the state's
 * allocator and counts against its memory cap (no intermediate tree).
 * Encoding writes straight from Lua values into a buffer. Both call the
 * check hook (ludo__json_set_check) as they go, for the CPU budget.
 *
 * Mapping: null <-> ludo.null (a sentinel table from the "ludo.null"
 * module); arrays <-> tables carrying the ludo.json.array metatable (so an
 * empty array survives a round trip), plain sequences also encode as arrays;
 * objects <-> tables with string keys (an empty plain table is an object);
 * integers <-> Lua integers, reals <-> Lua floats (1.0 stays 1.0); object
 * keys are written sorted, so the same value always gives the same text. */
#ifndef LUDO_SCRIPT_JSON_H
#define LUDO_SCRIPT_JSON_H

#include <lua.h>
#include <stddef.h>

#include "base/buf.h"
#include "ludo_defs.h"

#define LUDO__JSON_MAXDEPTH 128

/* Most keys one object may have to be encoded (the encoder sorts them on
 * the Lua stack, whose size is bounded). */
#define LUDO__JSON_MAXKEYS 200000

/* Bytes of input (decode) or output (encode) between two check calls. */
#define LUDO__JSON_CHECK_EVERY 65536

/* The check hook: returns 0 to go on, or leaves an error value on the
 * stack and returns nonzero to stop the decode or encode, which then
 * raises that value (ludo.json.encode/decode raise it too, instead of
 * returning nil, message). May itself raise. [-0, +(0|1), e] */
typedef int (*ludo__json_check_fn)(lua_State *L);

/* Installs the check hooks for the whole process (NULL, the default: no
 * checks). `fn` is called about every LUDO__JSON_CHECK_EVERY bytes while
 * decoding and encoding. `stopped` (may be NULL) is called for every
 * table encoded: a cheap test (no clock, nothing pushed) that returns
 * nonzero when the running call was already stopped, after which `fn` is
 * called to raise; so walking tables that write little (many references
 * to one hollow table) stops too. Set them before any state decodes or
 * encodes; they are not synchronised with running conversions. */
void ludo__json_set_check(ludo__json_check_fn fn, ludo__json_check_fn stopped);

/* Installs, for the whole process, the function that gives the memory cap
 * of L's state in bytes (0: none; NULL, the default: none known). Decoding
 * refuses at once, with ENOMEM, a table that the cap cannot hold: when an
 * object or array is about to double its storage and the old storage,
 * the new one and (for an object) its keys' strings together are past the
 * cap, with a message that says where and why (the plain memory error
 * said neither). Set it before any state decodes. */
typedef size_t (*ludo__json_cap_fn)(lua_State *L);
void ludo__json_set_cap(ludo__json_cap_fn fn);

/* Makes sure the registry holds the null sentinel and the array metatable.
 * Requires "ludo.null" through the global require. [-0, +0, e] */
void ludo__json_setup(lua_State *L);

/* Decodes `len` bytes of JSON (borrowed; no NUL needed) and pushes the
 * value. On malformed input or nesting deeper than `maxdepth` raises
 * "EPARSE: <what> at line L column C (byte B)" (B counts from 0),
 * "EPARSE: nesting deeper than N at <path>" or "EPARSE: empty input
 * (expected a JSON value)"; raises a memory error when the state's
 * allocator refuses, and the check hook's error. Duplicate object keys:
 * the last one wins. Holds no C memory across a raise. [-0, +1, e] */
void ludo__json_decode(lua_State *L, const char *s, size_t len,
                       int maxdepth);

/* Decodes the arguments of a call, a JSON array (as ludo__json_decode
 * otherwise), and pushes its values, not the array: returns their number
 * (the stack grows as needed; a memory error when it cannot). A text
 * whose top-level value is not an array pushes that value and returns -1.
 * [-0, +(n|1), e] */
int ludo__json_decode_args(lua_State *L, const char *s, size_t len,
                           int maxdepth);

/* Appends the JSON text of the value at `idx` to `b`. `skip`, when not
 * NULL, is a NULL-terminated list of keys left out of a top-level object.
 * Raises "EVALUE: <what> at <path>" for values JSON cannot carry
 * (functions, userdata, threads, mixed or sparse tables, non-string keys,
 * invalid UTF-8, nesting deeper than maxdepth: cycles end there) and
 * "ENOMEM" when `b` cannot grow. NaN and infinities become null.
 * [-0, +0, e] */
void ludo__json_encode(lua_State *L, int idx, ludo__buf_t *b, int maxdepth,
                       const char *const *skip);

/* Pushes the JSON text of the value at idx as a Lua string; raises like
 * ludo__json_encode (no C memory is held across the raise). [-0, +1, e] */
void ludo__json_tostring(lua_State *L, int idx, int maxdepth);

/* Appends the "key":value pairs of the object at idx (sorted, `skip` left
 * out) without the braces, so a caller can merge fields of its own. Returns
 * the number of pairs written. Raises like ludo__json_encode; the paths of
 * its errors start at "$.`name`" (the field the object is: "metadata").
 * [-0, +0, e] */
size_t ludo__json_encode_fields(lua_State *L, int idx, ludo__buf_t *b,
                                int maxdepth, const char *const *skip,
                                const char *name);

/* Append the text ludo__json_encode writes for a number (floats keep a
 * '.' or an exponent; NaN and the infinities are null), without setting
 * up an encoder: for callers that write a number they looked at already
 * (a score). Return 0, or -1 when `b` cannot grow (then raise with
 * ludo__json_nomem, as the encoder would). */
int ludo__json_add_integer(ludo__buf_t *b, lua_Integer v);
int ludo__json_add_float(ludo__buf_t *b, lua_Number d);
/* Raises the encoder's ENOMEM: "the JSON text reached the memory limit".
 * [-0, +1, v] */
void ludo__json_nomem(lua_State *L);
/* 1 when the value at idx is a table marked as a JSON array. [-0, +0, -] */
int ludo__json_is_array(lua_State *L, int idx);

/* Opens "ludo.null" for session states: a frozen userdata sentinel
 * (registered as a C module by the runtime). [-0, +1, m] */
int ludo__json_open_null(lua_State *L);

/* Pushes the null sentinel. [-0, +1, -] */
void ludo__json_pushnull(lua_State *L);

/* Opens the Lua module "ludo.json": encode, decode, null, array, is_array.
 * [-0, +1, e] */
LUDO_EXTERN int luaopen_ludo_json(lua_State *L);

#endif
