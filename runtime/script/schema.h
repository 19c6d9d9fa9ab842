/* schema.h - JSON Schema checks of Lua values, compiled once in C.
 *
 * An environment's action schema is compiled from its JSON text when the
 * environment loads and shared read-only by all of its session states, so
 * validating an action costs no Lua memory and no Lua code per session.
 * Keywords: type (string or list), properties, required,
 * additionalProperties (boolean or schema), items, enum, const, minimum,
 * maximum, exclusiveMinimum, exclusiveMaximum, multipleOf, minLength,
 * maxLength (UTF-8 characters), minItems, maxItems, minProperties,
 * maxProperties, pattern (pcre2, a search), anyOf, oneOf, allOf, not, and
 * $ref into the same schema (JSON pointers; cycles allowed). Annotations
 * and unknown keywords are ignored, as JSON Schema allows; a known keyword
 * with a malformed value, and the assertion keywords this checker lacks
 * (if/then/else, patternProperties, ...: `unsupported` in schema.c), fail
 * the compile with LUDO_EPARSE, so a schema never accepts what it would
 * reject. A schema (or subschema) `true` accepts every value and `false`
 * none.
 *
 * The schema text is parsed with jansson, which allocates from the heap
 * given to ludo__schema_compile (so the runtime's stats count the tree);
 * see schema.c for how jansson's process-wide allocator is routed. */
#ifndef LUDO_SCRIPT_SCHEMA_H
#define LUDO_SCRIPT_SCHEMA_H

#include <lua.h>
#include <stddef.h>

#include "base/alloc.h"
#include "base/buf.h"

typedef struct ludo__schema_s ludo__schema_t;

/* The bounds of a compile, for a schema an untrusted module declared (the
 * compile runs in C, outside the Lua budget and the state's cap):
 * `stop(ud)`, when not NULL, is asked every few hundred subschemas and
 * ends the compile with LUDO_ETIMEOUT when it answers 1 (ludo__state_stop
 * with the lua_State of the running call: the caller then raises with
 * ludo__schema_stop); `max_bytes` (0: none) bounds what the compiled
 * schema holds (the parsed tree and the nodes): past it, LUDO_ENOMEM. */
typedef struct {
  int (*stop)(void *ud);
  void *ud;
  size_t max_bytes;
} ludo__schema_limits_t;

/* Compiles the JSON Schema text `json` (copied; borrowed for the call),
 * within `lim` (NULL: no bounds). On success stores the schema in *out
 * (caller frees with ludo__schema_free); everything it holds comes from
 * `heap`, which must outlive it. Subschemas nest at most 512 deep,
 * counting the chain of $refs a compile follows; a $ref's pointer parts
 * are at most 255 bytes. Returns 0, LUDO_EPARSE (not JSON, or not a
 * schema this checker can apply: the message in err names the keyword and
 * its JSON pointer), LUDO_ENOMEM (also: past lim->max_bytes) or
 * LUDO_ETIMEOUT (lim->stop said so). */
int ludo__schema_compile(ludo__alloc_t *heap, const char *json, size_t len,
                         const ludo__schema_limits_t *lim,
                         ludo__schema_t **out, char *err, size_t errlen);

/* Frees a compiled schema into its heap; accepts NULL. */
void ludo__schema_free(ludo__schema_t *s);

/* Checks the Lua value at idx. Returns 1 when it conforms; otherwise 0 and
 * writes "<root>.<path>: <what>" into msg. Returns -1 when the running
 * call of L's state ran out of its budget during the check (looked at
 * every thousand or so steps: a recursive schema can make a small value
 * cost much): the caller frees what it holds and raises with
 * ludo__schema_stop. Checks nest at most 512 deep, whatever the schema,
 * and a value deeper than that fails. Never raises; uses raw access only
 * (no metamethods run). [-0, +0, -] */
int ludo__schema_check(lua_State *L, int idx, const ludo__schema_t *s,
                       const char *root, ludo__buf_t *msg);

/* The same, leaving out the keys of `skip` (a NULL-terminated list;
 * NULL: none) in the root object, as if it did not have them: how a
 * result's observation is checked without its reward, done and metadata.
 * [-0, +0, -] */
int ludo__schema_check_except(lua_State *L, int idx,
                              const ludo__schema_t *s, const char *root,
                              const char *const *skip, ludo__buf_t *msg);

/* Raises the timeout of the running call after a check returned -1.
 * [-0, +1, v] */
int ludo__schema_stop(lua_State *L);

/* Pushes a C closure `validate(value) -> true | false, message` bound to s
 * (borrowed: s must outlive the state). [-0, +1, m] */
void ludo__schema_push_validator(lua_State *L, const ludo__schema_t *s,
                                 const char *root);

#endif
