/* clientproto.h - the client's side of OpenEnv's /ws session protocol
 * (docs/protocol.md, OPENENV.md section 1.4): the request frames, and the
 * decoding of a reply frame into the result it carries or an error with a
 * LUDO_E* code and a message. Tools go through the session's MCP frames
 * (JSON-RPC tools/list and tools/call inside {"type":"mcp"}), as
 * ludo_session_call_tool does in-process: a tool call is not a step. No
 * I/O; results are borrowed from the frame, byte for byte.
 *
 * Error frames map to codes so a caller can tell its own mistakes from
 * the environment's and the server's:
 *
 *   INVALID_JSON      LUDO_EPARSE        UNKNOWN_TYPE   LUDO_EPROTO
 *   VALIDATION_ERROR  LUDO_ESCHEMA       CAPACITY_REACHED LUDO_ECAPACITY
 *   EXECUTION_ERROR   the ludo code its message starts with (a ludo
 *                     server's "ETIMEOUT: ..."), else LUDO_ESCRIPT
 *   FACTORY_ERROR     LUDO_ELOAD         SESSION_ERROR  LUDO_EDISCONNECTED
 *
 * and JSON-RPC errors: -32700 EPARSE, -32600 and -32601 EPROTO, -32602
 * ESCHEMA ("Invalid params: ...", arguments off the tool's schema) or
 * ENOENT (an unknown tool) or EINVAL, -32603 ENOENT ("does not support
 * MCP") or ESCRIPT (the tool raised), -32000 ECAPACITY (with
 * max_sessions) or ELOAD. The message keeps the server's words and names
 * its code: "ESCHEMA: Invalid message: message: expected string, got
 * integer (VALIDATION_ERROR)". */
#ifndef LUDO_NET_CLIENTPROTO_H
#define LUDO_NET_CLIENTPROTO_H

#include <stddef.h>

#include "base/buf.h"

/* Requests. */
enum {
  LUDO__CP_RESET = 1, /* {"type":"reset","data":OPTIONS} */
  LUDO__CP_STEP,      /* {"type":"step","data":ACTION} */
  LUDO__CP_STATE,     /* {"type":"state"} */
  LUDO__CP_TOOLS,     /* mcp tools/list */
  LUDO__CP_CALL_TOOL, /* mcp tools/call */
  LUDO__CP_CLOSE      /* {"type":"close"}: no reply */
};

/* The name of a request kind ("reset", "list_tools", ...). Static. */
const char *ludo__clientproto_name(int kind);

/* Appends to `b` the frame of request `kind` whose input is `json`/`len`
 * (borrowed): reset options (an object, or empty for none), a step's
 * action (an object), a tool call {"name":"x","arguments":{...}}
 * (arguments optional), nothing for the others. `id` is the JSON-RPC id of
 * an mcp request. The input is checked first: on LUDO_EPARSE (not JSON)
 * or LUDO_EINVAL (not an object; a tool call without a string "name")
 * `msg` says what is wrong and nothing is appended. `scratch` is the
 * caller's buffer for the check. Returns 0 or one of those, or
 * LUDO_ENOMEM. */
int ludo__clientproto_request(ludo__buf_t *b, int kind, const char *json,
                              size_t len, long long id,
                              ludo__buf_t *scratch, ludo__buf_t *msg);

/* Decodes `frame`/`len`, the reply to request `kind` (sent with JSON-RPC
 * id `id`). Returns 0 with the result's JSON text in *res and *rlen,
 * borrowed
 * from the frame: a reset's or step's {"observation",...}, a state, a
 * tools/list result {"tools":[...]}, a tools/call result. Otherwise a
 * LUDO_E* code (the table above; LUDO_EPROTO for a frame that is not the
 * reply it should be) with the message in `msg` (replaced); LUDO_ENOMEM.
 * *fatal is set to 1 for the error frames after which the server closes
 * the connection (CAPACITY_REACHED, FACTORY_ERROR, SESSION_ERROR) and for
 * a frame that breaks the protocol, else 0. */
int ludo__clientproto_reply(int kind, long long id, const char *frame,
                            size_t len, ludo__buf_t *scratch,
                            const char **res, size_t *rlen, ludo__buf_t *msg,
                            int *fatal);

#endif
