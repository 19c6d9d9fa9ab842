/* ludo.h - the public C API of ludo, an embeddable runtime for agent and
 * reinforcement-learning environments written in Lua 5.4.
 *
 * A host creates a runtime, loads environments (Lua modules) into it and
 * opens sessions. Every session owns its own sandboxed lua_State. Calls come
 * in two forms:
 *
 *   - blocking: ludo_session_reset/step/state run the call at once (and
 *     the runtime's loop while it waits) and return its JSON result;
 *   - non-blocking: the *_async variants queue the call on the loop and
 *     return at once; the work and the completion callback run from the
 *     loop: the host's own uv_run when the runtime lives on the host's
 *     loop (ludo_options_t.loop), else ludo_runtime_poll() (with a time
 *     budget, once per frame) or ludo_runtime_run().
 *
 * Re-entrancy, one rule (enforced in one place, runtime.c/session.c):
 *   - a call into a session that is already running or has a call in
 *     flight returns LUDO_EBUSY;
 *   - a blocking call (reset/step/state, ludo_runtime_run/poll) made from
 *     inside a host function or a ludo callback returns LUDO_EBUSY: it
 *     would re-enter the loop. Non-blocking calls are fine there;
 *   - closing a session from inside its own host function is deferred: its
 *     Lua stops at the next instruction with ECANCELED, and the session is
 *     torn down as soon as its Lua has returned to ludo. Closing from its
 *     own completion callback happens at once;
 *   - CPU budgets nest: Lua run from inside a host function (e.g. a cold
 *     open) has its own budget and never stops or extends the caller's.
 * On a borrowed loop, blocking calls run the host's loop (uv_run): never
 * make one from inside the host's own libuv callbacks.
 *
 * Threading: a runtime and everything created from it belong to the thread
 * that created the runtime. Use one runtime per thread for parallelism;
 * servers on several threads cooperate through a ludo_server_group_t, the
 * one object made to be shared between threads.
 *
 * Errors: every function that can fail returns 0 or a negative LUDO_E* code.
 * Whatever its comment lists, a function returns LUDO_EINVAL for a NULL
 * pointer it needs (a callback included), a count of 0 where items are
 * needed (a batch's n) or an empty name or path. A NULL input with its
 * length (json, len) is an empty input. ludo_err_name() and ludo_strerror()
 * describe a code. Sessions also keep a
 * human-readable message for their last failure (ludo_session_errmsg()),
 * and the same failure in parts (ludo_session_error(): call, phase, and
 * where a limit stopped the Lua). Tracebacks name file:line in every
 * frame; LUDO_DEBUG sets how much debug information ludo's own Lua
 * library keeps (docs/embedding.md).
 *
 * Ownership words used below: "borrowed until X" means the library owns the
 * memory and it stays valid until X; "copies" means the library keeps its own
 * copy of an input; "caller frees with X" means ownership passes to the caller.
 */
#ifndef LUDO_H
#define LUDO_H

#include <stddef.h>
#include <stdint.h>

#include "ludo_defs.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Returns the symbolic name of an error code ("ENOMEM"), or "EUNKNOWN".
 * The string is static. */
LUDO_EXTERN const char *ludo_err_name(int err);

/* Returns a static English description of an error code. */
LUDO_EXTERN const char *ludo_strerror(int err);

/* Returns the library version as "MAJOR.MINOR.PATCH" (static string). */
LUDO_EXTERN const char *ludo_version(void);




/* Fills `opts` with the defaults described above. */
LUDO_EXTERN void ludo_options_init(ludo_options_t *opts);

/* Creates a runtime. `opts` may be NULL for defaults; it is copied.
 * On success stores the runtime in *out (caller frees with
 * ludo_runtime_free). Returns 0, LUDO_EINVAL, LUDO_EBUSY (opts->loop
 * carries another runtime: one runtime per host loop, from its creation
 * to its ludo_runtime_free; one runtime loads any number of
 * environments) or LUDO_ENOMEM. */
LUDO_EXTERN int ludo_runtime_new(ludo_runtime_t **out,
                                 const ludo_options_t *opts);

/* Closes every session, client and server and frees every script still
 * open (pending calls and opens complete with LUDO_ECANCELED), frees every
 * environment and then the runtime. Accepts NULL. A server left open is
 * closed without a drain and without waiting for its peers (their
 * connections are dropped); a server closing (ludo_server_close) is finished
 * the same way; either's close callback runs once, from here. Must not be
 * called from inside a ludo callback or host function, nor from a host
 * handle's callback that a blocking call runs on a borrowed loop: there it
 * would free what is running, so it does nothing but log an error. Every
 * callback owed (calls, opens, close callbacks, servers' close callbacks
 * last) runs first, while every session, script, client, server and
 * environment of the runtime is still alive; only then is anything freed.
 * The callbacks it runs start nothing: every function that starts work
 * returns LUDO_ECLOSED there (and runs no callback), blocking or not: a
 * session's call or batch, an open, ludo_session_close_async, a script open
 * or call, ludo_env_load, ludo_env_prewarm, ludo_runtime_add_module, a
 * client's connect, call or ludo_client_close_async, ludo_server_new,
 * ludo_server_listen; ludo_session_close, ludo_script_free, ludo_env_free
 * and ludo_server_close from them do nothing (the free releases those
 * objects itself; that ludo_server_close's `cb` never runs). On its own loop
 * everything is released before this returns. On a borrowed loop ludo closes
 * only its own handles (with close callbacks); the runtime's memory is
 * released in the host's next uv_run, after which uv_loop_close() on the
 * host's loop returns 0 (the host's own handles are never touched). */
LUDO_EXTERN void ludo_runtime_free(ludo_runtime_t *rt);

/* Runs the work that is ready (starting queued calls, resuming Lua after
 * waits, completion callbacks, pool refills) for about `budget_us`
 * microseconds, and returns without blocking. Lua that runs longer is
 * time-sliced: it yields at the budget's end and goes on in the next poll
 * (its CPU budget keeps counting only while it runs). The end of a slice
 * is signalled by ludo's watchdog thread, so the overshoot is what the
 * OS takes to schedule that thread: about 0.1 ms on an idle machine
 * (docs/performance.md, poll.overshoot), milliseconds when every core is
 * busy. A slice can end only where the Lua may yield: code running inside
 * a coroutine the script resumed itself, a table.sort comparator, a
 * metamethod called from C or one long C operation (decoding a large
 * action) runs on until it can, bounded by its CPU budget
 * (docs/embedding.md, "Who owns the loop"). Callbacks started
 * from callbacks are delivered in the next poll. budget_us == 0: run what
 * is ready now, without a limit. On a borrowed loop, runs ludo's queue
 * only (the host runs the loop). Returns the number of calls in flight
 * (>= 0; a call counts until its completion callback has run, so 0 means
 * none is owed), LUDO_EBUSY from inside a host function or callback, or
 * LUDO_EINVAL. */
LUDO_EXTERN int ludo_runtime_poll(ludo_runtime_t *rt, uint32_t budget_us);

/* Runs the loop until no call is in flight and every completion callback
 * owed has run (including those a blocking call held back while it ran
 * the loop), and the Lua states of closed sessions, which the loop frees
 * a slice per pass, are all freed. Returns 0, LUDO_EINVAL (rt NULL) or
 * LUDO_EBUSY when called from inside a ludo callback. */
LUDO_EXTERN int ludo_runtime_run(ludo_runtime_t *rt);

/* Stops every call of `rt` in progress (issued and not yet completed):
 * the one running Lua now ends at its next VM instruction (or at the next
 * check of a long C function of ludo's: JSON, patterns), a queued or
 * waiting one as soon as it runs Lua (it starts, or its wait ends), each
 * failing with LUDO_ECANCELED, "ECANCELED: the call was interrupted by
 * the host"; a pcall in the Lua code cannot catch it. Callbacks run, and
 * blocking calls return, as for any failed call; sessions and scripts
 * stay usable. Calls issued afterwards are not affected: an interrupt
 * with no call in progress is lost. Async-signal-safe: made to be called
 * from a SIGINT handler (a CLI's first Ctrl-C); also callable from
 * another thread. Does nothing for NULL. */
LUDO_EXTERN void ludo_runtime_interrupt(ludo_runtime_t *rt);


/* Fills *stats. Returns 0 or LUDO_EINVAL. */
LUDO_EXTERN int ludo_runtime_stats(ludo_runtime_t *rt, ludo_stats_t *stats);

/* ---- host functions --------------------------------------------------
 * A host gives Lua states its own C functions as modules (see
 * ludo_host_module_t in ludo_defs.h): per environment, in
 * ludo_env_options_t.modules at ludo_env_load(), or for the whole runtime
 * with ludo_runtime_add_module(). require(name) looks at the
 * environment's modules first, then the runtime's. */

/* Fills `opts` with the defaults: no host modules. */
LUDO_EXTERN void ludo_env_options_init(ludo_env_options_t *opts);

/* Registers host module `m` with the runtime: every session state of every
 * environment loaded into `rt` (before or after this call) and every
 * script can then require(m->name). The struct and its name are copied;
 * m->funcs and m->ud are borrowed until ludo_runtime_free(rt). Returns 0,
 * LUDO_EINVAL (rt or m NULL, m->funcs NULL, a name that is empty or holds
 * characters outside [A-Za-z0-9_.-], a name the runtime already has, or
 * one of ludo's own: "ludo" and "ludo.*"), LUDO_ECLOSED (from a callback
 * that ludo_runtime_free runs) or LUDO_ENOMEM; on failure
 * nothing is registered and ludo_runtime_errmsg() says why. */
LUDO_EXTERN int ludo_runtime_add_module(ludo_runtime_t *rt,
                                        const ludo_host_module_t *m);

/* ---- host libraries ---------------------------------------------------
 * A host library is a shared object (.so) that gives environments their
 * host modules when no C host program of their own runs them: `ludo run`
 * (and the later `ludo serve` and `ludo eval`) dlopen it, with RTLD_NOW,
 * and call the function it exports under the name LUDO_HOST_INIT_SYMBOL,
 * declared below so that a library's definition is checked against it:
 *
 *   #include <ludo.h>
 *   LUDO_EXTERN int ludo_host_init(ludo_runtime_t *rt, char *err,
 *                                  size_t err_size) {
 *     ludo_host_module_t m = {"game", game_funcs, &game_counters};
 *     return ludo_runtime_add_module(rt, &m);
 *   }
 *
 * The library links neither libludo nor Lua: the ludo_* and lua_*
 * functions it calls are those of the program that loads it. It is trusted
 * native code chosen by the operator, running with the program's rights
 * and outside the Lua sandbox (docs/sandbox.md). examples/gridworld/host.c
 * is a complete one. */

#define LUDO_HOST_INIT_SYMBOL "ludo_host_init"

/* Called once per runtime, on the runtime's thread, after
 * ludo_runtime_new() and before any environment is loaded into `rt`;
 * registers the library's modules with ludo_runtime_add_module() (it may
 * call any function of this header on `rt`). What it registers is borrowed
 * until ludo_runtime_free(rt): the loader keeps the library loaded until
 * then, and never calls anything else in it. Returns 0, or a negative
 * LUDO_E* code: the program then reports the failure with the message the
 * function wrote into `err` (at most `err_size` bytes, NUL-terminated;
 * `err` is empty on entry), else with ludo_runtime_errmsg(rt), frees the
 * runtime and loads no environment. */
LUDO_EXTERN int ludo_host_init(ludo_runtime_t *rt, char *err,
                               size_t err_size);

/* The type of ludo_host_init, for loaders (dlsym). */
typedef int (*ludo_host_init_fn)(ludo_runtime_t *rt, char *err,
                                 size_t err_size);

/* ---- environments ---------------------------------------------------- */

/* Loads the environment at `path`: a folder holding env.lua (or init.lua),
 * or a .lua file. The module is compiled once and run in a probe state to
 * read its metadata and schemas. `opts` may be NULL; it is copied (the
 * module arrays it points to are borrowed, see above).
 * On success stores the environment in *out; it belongs to `rt` and is
 * freed by ludo_env_free() or ludo_runtime_free().
 * Returns 0, LUDO_ENOENT (no such file), LUDO_ELOAD (syntax or runtime
 * error in the module, a malformed declaration, or a source file refused:
 * one leading out of its folder, not a regular file, or over 16 MiB,
 * docs/sandbox.md "Source files"; see ludo_runtime_errmsg),
 * LUDO_EINVAL (also: a host module of `opts` without a name or function
 * list, named "ludo" or "ludo.*", or given twice: the rules of
 * ludo_runtime_add_module), LUDO_ETIMEOUT (the module's top level ran past
 * the CPU budget or wall limit), LUDO_ECLOSED (from a callback that
 * ludo_runtime_free runs) or LUDO_ENOMEM. */
LUDO_EXTERN int ludo_env_load(ludo_runtime_t *rt, const char *path,
                              const ludo_env_options_t *opts,
                              ludo_env_t **out);

/* Message describing the runtime's last failed ludo_env_load(),
 * ludo_session_open() or ludo_runtime_add_module(). Borrowed until the
 * next such call. Never NULL. */
LUDO_EXTERN const char *ludo_runtime_errmsg(ludo_runtime_t *rt);

/* Frees an environment, and the states of closed sessions (of any
 * environment) the loop has not freed yet. Returns LUDO_EBUSY (and frees
 * nothing) while it has open sessions or opens in flight, or a server
 * uses it (one not closed, or whose close has not completed: its
 * callback has not run yet). Accepts NULL.
 * From a callback that ludo_runtime_free runs it returns 0 and leaves
 * `env` to ludo_runtime_free, which frees it with the others. */
LUDO_EXTERN int ludo_env_free(ludo_env_t *env);

/* The environment's description as JSON: {"name", "description", "version",
 * "author", "documentation_url", "readme_content", "concurrent",
 * "action", "observation", "state"[, "tools"]} where action, observation
 * and state are JSON Schemas and tools, present when the environment
 * declares any, lists them as [{"name", "description", "input_schema"}].
 * Borrowed until the environment is freed. With env NULL: "{}". */
LUDO_EXTERN const char *ludo_env_info(ludo_env_t *env, size_t *len);

/* Makes sure `n` ready states wait in the environment's pool, building the
 * missing ones now. Returns 0, LUDO_EINVAL (env NULL), LUDO_ECLOSED (from
 * a callback that ludo_runtime_free runs), or the codes of building a
 * state: LUDO_ELOAD, LUDO_ETIMEOUT, LUDO_ENOMEM. */
LUDO_EXTERN int ludo_env_prewarm(ludo_env_t *env, unsigned n);

/* ---- sessions -------------------------------------------------------- */

/* Opens a session: takes a ready state from the pool (or builds one) with
 * the environment module, its rubric and transforms instantiated. The
 * episode starts with the first reset. Stores the session in *out (caller
 * frees with ludo_session_close). Returns 0, LUDO_ENOMEM, LUDO_ELOAD,
 * LUDO_ETIMEOUT (building a state ran the module's top level past the CPU
 * budget or wall limit), LUDO_ECANCELED (ludo_runtime_interrupt stopped
 * the build) or LUDO_EBUSY (the environment is not marked concurrent and
 * already has a session open) or LUDO_ECLOSED (from a callback that
 * ludo_runtime_free runs). */
LUDO_EXTERN int ludo_session_open(ludo_env_t *env, ludo_session_t **out);

/* Opens a session on the loop: `cb` runs from the loop with the session
 * (taken from the pool, or built when the pool is empty) or a failure
 * code (held, with the open itself, while a blocking call runs the loop:
 * never inside it). Returns 0, LUDO_EINVAL, LUDO_ECLOSED (from a
 * callback that ludo_runtime_free runs) or LUDO_ENOMEM (then `cb` is
 * never called). The environment cannot be freed while an open is
 * pending. */
LUDO_EXTERN int ludo_session_open_async(ludo_env_t *env, ludo_open_cb cb,
                                        void *ud);

/* Closes a session: runs the module's close() if any (under a cleanup
 * budget of 100 ms CPU), completes a pending call's callback with
 * LUDO_ECANCELED and frees the Lua state. Accepts NULL. Safe from inside
 * the session's own completion callback; from inside its own host function
 * the close is deferred (see the re-entrancy rule). When the host never
 * runs the loop, a close also refills the environment's pool by one
 * state, so the next open stays cheap. */
LUDO_EXTERN void ludo_session_close(ludo_session_t *s);

/* Closes a session from the loop: the same as ludo_session_close, then
 * `cb` (may be NULL) runs. The close counts as a call in flight for
 * ludo_runtime_run and ludo_runtime_poll until the session is torn down,
 * with a callback or without. While a blocking call runs the loop, the
 * session's call in flight is cancelled at once and the teardown, with
 * its callbacks, waits until that call has returned (a blocking call
 * on `s` itself, or a blocking batch holding `s`, ends with
 * LUDO_ECANCELED for it; the teardown and `cb` then run from the loop,
 * never inside that blocking call). New calls on `s` return LUDO_ECLOSED
 * at once. Returns 0, LUDO_EINVAL or LUDO_ECLOSED (already closing, or
 * called from a callback that ludo_runtime_free runs; `cb` is then never
 * called). */
LUDO_EXTERN int ludo_session_close_async(ludo_session_t *s, ludo_close_cb cb,
                                         void *ud);

/* The session's id (a UUID string). Borrowed until close. With s NULL:
 * "". */
LUDO_EXTERN const char *ludo_session_id(const ludo_session_t *s);

/* Bytes held by the session's Lua state now (0 for NULL). */
LUDO_EXTERN size_t ludo_session_memory(const ludo_session_t *s);

/* Runs a full garbage collection in the session's Lua state (e.g. between
 * episodes, or before reading ludo_session_memory). Returns 0, LUDO_EINVAL
 * (s NULL), or LUDO_EBUSY while a call is queued or in flight (until its
 * callback has run) or `s` waits for its turn in a blocking batch. */
LUDO_EXTERN int ludo_session_collect(ludo_session_t *s);

/* Host data slot: the library never touches it. With s NULL, set does
 * nothing and get returns NULL. */
LUDO_EXTERN void ludo_session_set_data(ludo_session_t *s, void *data);
LUDO_EXTERN void *ludo_session_get_data(const ludo_session_t *s);

/* The session a host function runs in, from its lua_State (passed as void*
 * so this header does not need lua.h). NULL when `L` is not a session's. */
LUDO_EXTERN ludo_session_t *ludo_session_from_lua(void *L);

/* Strict mode: when `on` is non-zero, the observation of every following
 * reset and step (after the transform, without reward, done and metadata:
 * what the result carries under "observation") is checked against the
 * environment's declared observation schema; one that does not match
 * fails the call with LUDO_ESCHEMA and a message naming the environment,
 * the call and the offending field:
 *   "ESCHEMA: environment gridworld: the observation of step does not
 *    match its declared schema: observation.position.x: expected integer,
 *    got string"
 * The environment's code has run by then (a step still counts). Off by
 * default; `ludo run` turns it on unless given --no-strict. Returns 0, LUDO_EINVAL (s is NULL),
 * LUDO_ECLOSED, or LUDO_EBUSY while a call is queued or in flight. */
LUDO_EXTERN int ludo_session_set_strict(ludo_session_t *s, int on);

/* Message for the session's last failed call, e.g.
 * "ESCHEMA: action.message: expected string, got number".
 * Borrowed until the next call on the session. Never NULL ("" for a NULL
 * session). The message is kept up to 16 KiB: the text the Lua raised
 * up to 12 KiB (cut at a UTF-8 boundary, then " [... N more bytes]"),
 * the rest for ludo's code prefix and the traceback. The raised value is
 * under the session's memory cap; this copy is the runtime's. */
LUDO_EXTERN const char *ludo_session_errmsg(const ludo_session_t *s);

/* The session's last failed call in parts (see ludo_error_t): its code,
 * message, call, phase (e.g. "rubric" of a "step") and, for a CPU budget,
 * wall-clock limit or memory cap, where its Lua was stopped. The same
 * failure as ludo_session_errmsg(); a limit's message ends with the same
 * facts: "ETIMEOUT: the call exceeded its CPU budget of 50 ms (at
 * examples/x/env.lua:12) during the rubric of step". Fills *err (its
 * strings borrowed until the next call on the session or its close).
 * Returns 0 or LUDO_EINVAL (NULL argument). */
LUDO_EXTERN int ludo_session_error(const ludo_session_t *s,
                                   ludo_error_t *err);

/* Blocking calls. `json`/`len` is the input: reset options
 * ({"seed":1,"episode_id":"e1",...}, or NULL/empty for none), the action for
 * step, nothing for state (pass NULL, 0). On success out/out_len receive
 * the result JSON, borrowed until the next call on this session or its
 * close:
 *   reset, step: {"observation":{...},"reward":R,"done":B[,"metadata":{...}]}
 *   state:       {"episode_id":...,"step_count":N,...}
 * Returns 0 or LUDO_EPARSE, LUDO_ESCHEMA, LUDO_EVALUE, LUDO_ESCRIPT,
 * LUDO_ENOMEM, LUDO_ETIMEOUT, LUDO_EBUSY (a call is in flight on this
 * session, or called from inside a callback), LUDO_ECLOSED, LUDO_ETOOBIG
 * (the input is larger than max_input_bytes; ludo_session_errmsg says by
 * how much).
 * After any error the session stays open and usable. */
LUDO_EXTERN int ludo_session_reset(ludo_session_t *s, const char *json,
                                   size_t len, const char **out,
                                   size_t *out_len);
LUDO_EXTERN int ludo_session_step(ludo_session_t *s, const char *json,
                                  size_t len, const char **out,
                                  size_t *out_len);
LUDO_EXTERN int ludo_session_state(ludo_session_t *s, const char **out,
                                   size_t *out_len);


/* Non-blocking calls: copy the input, queue the call and return at once;
 * the Lua runs from the loop and `cb` runs after it, never from inside
 * this function. The callback may start the next call on the same session
 * or close it. Returns 0, or LUDO_EBUSY / LUDO_ECLOSED / LUDO_ENOMEM, in
 * which case `cb` is never called. */
LUDO_EXTERN int ludo_session_reset_async(ludo_session_t *s, const char *json,
                                         size_t len, ludo_call_cb cb,
                                         void *ud);
LUDO_EXTERN int ludo_session_step_async(ludo_session_t *s, const char *json,
                                        size_t len, ludo_call_cb cb,
                                        void *ud);
LUDO_EXTERN int ludo_session_state_async(ludo_session_t *s, ludo_call_cb cb,
                                         void *ud);

/* MCP tools (an environment's `tools`, docs/environments.md). Calls tool
 * `name` with `arguments` outside the step protocol, as JSON-RPC tools/call
 * does; the call counts no step. `json` is {"name":"echo_message",
 * "arguments":{"message":"hi"}} ("arguments" may be left out: {}). On
 * success the result is MCP's CallToolResult, in OpenEnv's field names and
 * MCP's: {"content":[{"type":"text","text":"hi",...}],
 * "structured_content":{"result":"hi"},"structuredContent":{...},
 * "data":"hi","is_error":false,"isError":false,"meta":null}, borrowed like
 * a step's result. Returns 0 or LUDO_ENOENT (no such tool, or the
 * environment has none), LUDO_ESCHEMA (no "name", or the arguments do not
 * match the tool's input schema; the message names the field),
 * LUDO_ESCRIPT (the tool raised), and the codes of ludo_session_step.
 * The tool list itself is in ludo_env_info() under "tools". A step action
 * {"type":"list_tools"} or {"type":"call_tool","tool_name":..,
 * "arguments":{..}} reaches the tools through ludo_session_step too, as
 * OpenEnv's MCP clients send them. */
LUDO_EXTERN int ludo_session_call_tool(ludo_session_t *s, const char *json,
                                       size_t len, const char **out,
                                       size_t *out_len);
/* The same, non-blocking, with the rules of ludo_session_step_async. */
LUDO_EXTERN int ludo_session_call_tool_async(ludo_session_t *s,
                                             const char *json, size_t len,
                                             ludo_call_cb cb, void *ud);

/* Tasks (an environment's `tasks`, docs/environments.md): the task sets
 * a trainer enumerates, as OpenEnv's Task API serves them. `json` is one
 * request, run in the session's state under its CPU budget and memory cap
 * like any call, outside the episode (it changes no step count, episode
 * id or seed):
 *   {"method":"splits"}                  -> [{"name":"train","type":"train"},
 *                                            ...] (a split named train,
 *                                            validation or test has that
 *                                            type, any other "validation")
 *   {"method":"list","split":"test"}     -> [task, ...]
 *   {"method":"count","split":"test"}    -> 7595
 *   {"method":"get","split":"test","index":12}               -> task
 *   {"method":"range","split":"test","start":0,"stop":32}    -> [task, ...]
 * Indices count from 0; start and stop (either may be left out or null)
 * follow Python's slices: stop is exclusive, negative values count from
 * the end. A task is any JSON value the environment gives. On success
 * the result, JSON text, is borrowed like a step's. Returns 0 or
 * LUDO_ENOTSUP (the environment declares no tasks, or gives nothing to
 * answer this method with: no count, say, and no list to count),
 * LUDO_ERANGE (get: no task at that index; ludo_session_errmsg says
 * which), LUDO_ESCHEMA (a malformed request, or a split the environment
 * does not list; the message names the field: "request.split: unknown
 * split 'dev' (the splits are: train, test)"), LUDO_EVALUE (the
 * environment's tasks functions returned something that is not a list
 * of JSON values, or a count that is not a whole number >= 0; the
 * message names the function), LUDO_ESCRIPT (they raised), and the codes
 * of ludo_session_step. A reset's options select a task with "split" and
 * "index": the environment's reset receives it as opts.task. */
LUDO_EXTERN int ludo_session_tasks(ludo_session_t *s, const char *json,
                                   size_t len, const char **out,
                                   size_t *out_len);
/* The same, non-blocking, with the rules of ludo_session_step_async; an
 * environment that declares no tasks makes it return LUDO_ENOTSUP at once
 * (`cb` is then never called). */
LUDO_EXTERN int ludo_session_tasks_async(ludo_session_t *s, const char *json,
                                         size_t len, ludo_call_cb cb,
                                         void *ud);

/* ---- servers ---------------------------------------------------------
 * An OpenEnv server for one environment, on the runtime's loop: the HTTP
 * routes, the /ws session protocol, MCP over HTTP and WebSocket, and
 * /metrics, as docs/protocol.md describes. Sessions it opens are the
 * runtime's sessions (same limits); they serve clients, not the host. A
 * host that lends its loop runs it as usual; with ludo's own loop, run it
 * with ludo_runtime_run(). */

/* Fills `o` with the defaults (see ludo_server_options_t). */
LUDO_EXTERN void ludo_server_options_init(ludo_server_options_t *o);

/* Creates a server for `env` (o may be NULL: defaults; copied, the token
 * too). It does not listen yet. Returns 0, LUDO_EINVAL (an environment
 * declared concurrent = false with max_sessions above 1 or in a group of
 * several servers; a worker index out of the group's range or taken
 * already; a token that is empty or has a byte other than visible ASCII,
 * which no client could send; the message is in ludo_runtime_errmsg),
 * LUDO_ECLOSED (from a callback that ludo_runtime_free runs) or
 * LUDO_ENOMEM. The environment must outlive the server: ludo_env_free
 * refuses it with LUDO_EBUSY until the server's close completes. */
LUDO_EXTERN int ludo_server_new(ludo_env_t *env,
                                const ludo_server_options_t *o,
                                ludo_server_t **out);

/* Listens on `host` (a numeric address, or "localhost") and `port` (0:
 * any free one; see ludo_server_port). Returns 0, LUDO_EINVAL,
 * LUDO_EIO (the address is in use, say) or LUDO_ECLOSED (the server is
 * closing, or from a callback that ludo_runtime_free runs);
 * ludo_server_errmsg says why. */
LUDO_EXTERN int ludo_server_listen(ludo_server_t *sv, const char *host,
                                   int port);

/* The port listened on, or 0. */
LUDO_EXTERN int ludo_server_port(const ludo_server_t *sv);

/* Why the last ludo_server_listen failed. Borrowed; never NULL. */
LUDO_EXTERN const char *ludo_server_errmsg(const ludo_server_t *sv);

/* Sessions the server has open (or opening) now (in a group: this
 * server's own). */
LUDO_EXTERN unsigned ludo_server_sessions(const ludo_server_t *sv);

/* Stops accepting, closes every WebSocket (1001) and connection, closes
 * the server's sessions (calls in flight end), and frees the server;
 * `cb(ud)` (may be NULL) runs from the loop when all of it is done, which
 * needs the loop to run, or from ludo_runtime_free when that comes first
 * (then once, before the free releases anything; the server's memory goes
 * as its handles close). Accepts NULL. */
LUDO_EXTERN void ludo_server_close(ludo_server_t *sv, void (*cb)(void *ud),
                                   void *ud);

/* ---- server groups (workers) -----------------------------------------
 * Several servers for one environment, one per thread, each with its own
 * loop, runtime and environment (nothing Lua-related is shared): the way
 * `ludo serve --workers N` uses every core (docs/serve-workers.md). The
 * servers of a group:
 *   - listen on one port with SO_REUSEPORT, the kernel spreading the
 *     connections over them: listen with worker 0 first (port 0 picks a
 *     free one), then the others on the port it got;
 *   - share one session count, which max_sessions applies to (give every
 *     server the same options), and one set of metrics (/metrics shows
 *     the whole process, and per worker);
 *   - name their sessions "w<worker>-<uuid>" and pass a call on a session
 *     of another worker (an X-Session-Id request, a JSON-RPC tools/call or
 *     openenv/session/close with session_id, a /ws?session_id= attach) to
 *     that worker as a message, and its answer back: a client need not
 *     know which worker it reached.
 * A group is the one ludo object used from several threads; everything
 * else belongs to its thread as before. Each server is created, run and
 * closed on its own thread; close every one (and let its close complete)
 * before ludo_server_group_free. */

/* Creates a group for `workers` servers (1 to LUDO_SERVER_MAX_WORKERS).
 * Stores it in *out (caller frees with ludo_server_group_free). Returns
 * 0, LUDO_EINVAL or LUDO_ENOMEM. */
LUDO_EXTERN int ludo_server_group_new(unsigned workers,
                                      ludo_server_group_t **out);

/* Frees the group, once all of its servers are closed. Accepts NULL. */
LUDO_EXTERN void ludo_server_group_free(ludo_server_group_t *g);

/* ---- clients ---------------------------------------------------------
 * A client of an OpenEnv server (`ludo serve`, or OpenEnv's own), on the
 * runtime's loop: one WebSocket to the server's /ws route speaking its
 * session protocol (docs/client.md). The URL is given as OpenEnv's client
 * takes it: "http://host:8000" (or "host:8000") means
 * "ws://host:8000/ws", a "ws://" URL with a path is used as it is;
 * https:// and wss:// are refused (no TLS).
 *
 * One call at a time per client; each gets the server's next frame as its
 * reply. Results are the server's JSON, byte for byte: a reset's or
 * step's {"observation":{...},"reward":R,"done":B,"metadata":{...}}, a
 * state, MCP results. Calls come in two forms, like a session's: blocking
 * (run the loop until the reply; other work of the loop goes on, so a
 * server of the same runtime keeps serving) and non-blocking (`_async`:
 * `cb` runs from the loop, never inside the call; held while a blocking
 * call of a session or script runs the loop). A blocking call from inside
 * a callback or host function returns LUDO_EBUSY.
 *
 * Keepalive: pings after ping_interval_ms without a frame from the server,
 * and the connection is dropped when no pong comes within
 * pong_timeout_ms, so a dead server is noticed while a long step runs
 * (OpenEnv issue #875).
 *
 * Lost connections (OpenEnv issue #1103). The server's session and its
 * episode live as long as the WebSocket. When the connection goes (the
 * server closed it or ended the session, the network failed, keepalive
 * failed, a reply did not come in time):
 *   - a call in flight fails with LUDO_EDISCONNECTED (or the code of the
 *     error frame the server sent before closing, e.g. LUDO_ECAPACITY),
 *     its message saying why and that the episode is gone;
 *   - if an episode was under way (a reset had succeeded), step and state
 *     fail the same way, sending nothing, until a reset;
 *   - the next reset (or tool call) connects again, opening a new session,
 *     and starts a new episode there.
 * With no_reconnect set, a lost connection stays lost. A connection that
 * cannot be made fails the call that needed it with LUDO_ECONNECT; the
 * next call tries again.
 *
 * Error codes of every call: LUDO_EBUSY (a call in flight),
 * LUDO_ECLOSED, LUDO_EINVAL / LUDO_EPARSE (input that is not a JSON
 * object; nothing was sent), LUDO_ECONNECT, LUDO_EDISCONNECTED,
 * LUDO_ENOREPLY (no reply within timeout_ms: the connection is dropped,
 * as a late reply could not be told from the next), LUDO_ETOOBIG (a
 * reply over max_message_bytes, or a request over the server's limit: the
 * connection is dropped), LUDO_EPROTO (the server broke the protocol),
 * LUDO_ECANCELED (closed meanwhile), LUDO_ENOMEM, and the server's
 * errors: LUDO_EPARSE (INVALID_JSON),
 * LUDO_ESCHEMA (VALIDATION_ERROR: the action does not match the schema),
 * LUDO_ESCRIPT or the code a ludo server names (EXECUTION_ERROR:
 * "ETIMEOUT: ..."), LUDO_ECAPACITY (CAPACITY_REACHED), LUDO_ELOAD
 * (FACTORY_ERROR), LUDO_EDISCONNECTED (SESSION_ERROR). The message
 * (ludo_client_errmsg, or the callback's data) keeps the server's words
 * and names its code: "ESCHEMA: Invalid message: message: expected string,
 * got integer (VALIDATION_ERROR)". After an error the client stays
 * usable. After the errors the server closes the connection on
 * (CAPACITY_REACHED, FACTORY_ERROR, SESSION_ERROR, a protocol error) the
 * client closes it too and the next call connects again, even when made
 * from that error's callback before the server's close came. */

/* Fills `o` with the defaults (see ludo_client_options_t). */
LUDO_EXTERN void ludo_client_options_init(ludo_client_options_t *o);

/* Connects to the server at `url` (copied) with `o` (NULL: defaults;
 * copied, the token too), blocking. Stores the client in *out (caller
 * frees with ludo_client_close). Returns 0, or LUDO_EINVAL (a URL or
 * option that cannot work, e.g. https://), LUDO_ECONNECT (no connection,
 * or the server refused the WebSocket: a 401 without the token, say),
 * LUDO_EBUSY (from inside a callback), LUDO_ECLOSED (from a callback
 * that ludo_runtime_free runs), LUDO_ENOMEM: then *out is NULL and
 * ludo_runtime_errmsg(rt) says why. */
LUDO_EXTERN int ludo_client_connect(ludo_runtime_t *rt, const char *url,
                                    const ludo_client_options_t *o,
                                    ludo_client_t **out);

/* Connects without blocking: stores the client in *out at once (it can
 * be closed, or given calls, while it connects: they wait for the
 * connection) and `cb` runs from the loop with the outcome (data: the
 * WebSocket URL, or the error message). A failed connection leaves the
 * client usable: the next call tries again. Returns 0, or LUDO_EINVAL /
 * LUDO_ECLOSED (from a callback that ludo_runtime_free runs) /
 * LUDO_ENOMEM (*out NULL, `cb` never runs; ludo_runtime_errmsg says
 * why). */
LUDO_EXTERN int ludo_client_connect_async(ludo_runtime_t *rt,
                                          const char *url,
                                          const ludo_client_options_t *o,
                                          ludo_client_cb cb, void *ud,
                                          ludo_client_t **out);

/* Blocking calls. Input: reset options ({"seed":1,...}, or NULL/0 for
 * none), the action for step, {"name":"tool","arguments":{...}} for
 * call_tool, nothing for the others. On success *out and *out_len (out_len
 * may be NULL) receive the result, borrowed until the next call on `c` or
 * its close:
 *   reset, step  the server's {"observation":...,"reward":...,"done":...}
 *   state        {"episode_id":...,"step_count":N,...}
 *   list_tools   MCP's tools/list result {"tools":[{"name",
 *                "description","inputSchema"}]}
 *   call_tool    MCP's tools/call result (CallToolResult, see
 *                ludo_session_call_tool); a tool call is not a step
 *   info         the environment's description as ludo_env_info has it
 *                ({"name",...,"action","observation","state"}), from the
 *                server's GET /metadata and /schema (own connections)
 * Returns 0 or a code listed above. */
LUDO_EXTERN int ludo_client_reset(ludo_client_t *c, const char *json,
                                  size_t len, const char **out,
                                  size_t *out_len);
LUDO_EXTERN int ludo_client_step(ludo_client_t *c, const char *json,
                                 size_t len, const char **out,
                                 size_t *out_len);
LUDO_EXTERN int ludo_client_state(ludo_client_t *c, const char **out,
                                  size_t *out_len);
LUDO_EXTERN int ludo_client_list_tools(ludo_client_t *c, const char **out,
                                       size_t *out_len);
LUDO_EXTERN int ludo_client_call_tool(ludo_client_t *c, const char *json,
                                      size_t len, const char **out,
                                      size_t *out_len);
LUDO_EXTERN int ludo_client_info(ludo_client_t *c, const char **out,
                                 size_t *out_len);

/* Non-blocking calls: check and copy the input, start the call and
 * return; `cb` runs from the loop with the outcome (and counts as a call
 * in flight for ludo_runtime_run / ludo_runtime_poll). Returns 0, or
 * LUDO_EBUSY / LUDO_ECLOSED / LUDO_EINVAL / LUDO_EPARSE /
 * LUDO_EDISCONNECTED (an episode lost, see above) / LUDO_ENOMEM, in which
 * case `cb` never runs and ludo_client_errmsg says why. */
LUDO_EXTERN int ludo_client_reset_async(ludo_client_t *c, const char *json,
                                        size_t len, ludo_client_cb cb,
                                        void *ud);
LUDO_EXTERN int ludo_client_step_async(ludo_client_t *c, const char *json,
                                       size_t len, ludo_client_cb cb,
                                       void *ud);
LUDO_EXTERN int ludo_client_state_async(ludo_client_t *c, ludo_client_cb cb,
                                        void *ud);
LUDO_EXTERN int ludo_client_list_tools_async(ludo_client_t *c,
                                             ludo_client_cb cb, void *ud);
LUDO_EXTERN int ludo_client_call_tool_async(ludo_client_t *c,
                                            const char *json, size_t len,
                                            ludo_client_cb cb, void *ud);
LUDO_EXTERN int ludo_client_info_async(ludo_client_t *c, ludo_client_cb cb,
                                       void *ud);

/* Closes the client: a call in flight completes at once (its callback
 * runs inside this with LUDO_ECANCELED, or with its outcome when that had
 * come); then, from the loop, the server is told ({"type":"close"} and
 * the WebSocket's closing handshake, bounded by 5 s) and the memory is
 * released. Accepts NULL. Fine from inside the client's own callback. `c`
 * is invalid after this. ludo_runtime_free closes every client left (a
 * call in flight completes with LUDO_ECANCELED) without waiting for the
 * server. */
LUDO_EXTERN void ludo_client_close(ludo_client_t *c);

/* The same, and `cb(ud)` runs from the loop once everything is released
 * (a call in flight meanwhile for ludo_runtime_run, also when `cb` is
 * NULL; ludo_runtime_free runs it before it frees anything). Returns 0,
 * or, in which case `cb` never runs: LUDO_EINVAL (`c` NULL),
 * LUDO_ECLOSED (`c` is already closing, e.g. from its own callback that
 * its close runs, or from a callback that ludo_runtime_free runs: the
 * client is closed all the same), LUDO_ENOMEM (no memory to keep `cb`:
 * the client is closed all the same). */
LUDO_EXTERN int ludo_client_close_async(ludo_client_t *c,
                                        void (*cb)(void *ud), void *ud);

/* Message for the client's last failed call ("" before any), e.g.
 * "EDISCONNECTED: the connection to ws://127.0.0.1:8000/ws closed (1000)
 * during step; ...". Borrowed until the next call on `c`. Never NULL. */
LUDO_EXTERN const char *ludo_client_errmsg(const ludo_client_t *c);

/* The WebSocket URL the client uses ("ws://host:8000/ws"). Borrowed until
 * close. */
LUDO_EXTERN const char *ludo_client_url(const ludo_client_t *c);

/* Host data slot: the library never touches it. */
LUDO_EXTERN void ludo_client_set_data(ludo_client_t *c, void *data);
LUDO_EXTERN void *ludo_client_get_data(const ludo_client_t *c);

/* ---- scripts ---------------------------------------------------------
 * A script is a Lua module in a sandboxed state of its own, with the same
 * sandbox, memory cap and CPU budget as a session: an agent's policy, a
 * tool, a report. The host calls its functions by name. */

/* Opens module `module` (a name such as "ludo.policy" or "policy",
 * resolved like a session's require: `dir` first when not NULL, then the
 * module path and the embedded modules). Its top level runs under the CPU
 * budget. Stores the script in *out (caller frees with ludo_script_free).
 * Returns 0, LUDO_ELOAD (see ludo_runtime_errmsg), LUDO_ETIMEOUT,
 * LUDO_ENOMEM, LUDO_EINVAL, LUDO_EBUSY (from inside a host function or
 * callback) or LUDO_ECLOSED (from a callback that ludo_runtime_free
 * runs). */
LUDO_EXTERN int ludo_script_open(ludo_runtime_t *rt, const char *module,
                                 const char *dir, ludo_script_t **out);

/* Calls module.<fn>(args...) where `args_json` is a JSON array (NULL or
 * empty: no arguments), blocking, under the CPU budget; the function may
 * wait (ludo.sleep and other waiting primitives). On success *out and *out_len
 * receive the JSON of its first result (null when it returned nothing),
 * borrowed until the next call or ludo_script_free. Returns 0, or
 * LUDO_EINVAL (no such function, arguments not an array), LUDO_EPARSE,
 * LUDO_EVALUE (the result is not JSON), LUDO_ESCRIPT, LUDO_ETIMEOUT,
 * LUDO_ENOMEM, LUDO_EBUSY, LUDO_ECANCELED, LUDO_ECLOSED (the script is
 * being freed), LUDO_ETOOBIG (the input is over max_input_bytes; the
 * message says by how much); the message is in
 * ludo_script_errmsg(), except after a free during the call (see
 * ludo_script_free): LUDO_ECANCELED, and the script is gone. */
LUDO_EXTERN int ludo_script_call(ludo_script_t *sc, const char *fn,
                                 const char *args_json, size_t len,
                                 const char **out, size_t *out_len);

/* Calls module.<fn>(args...) like ludo_script_call, without blocking:
 * copies `fn` and the input, queues the call on the loop and returns at
 * once; the Lua runs from the loop (a call that waits, e.g. on ludo.sleep,
 * lets other calls of the loop go on meanwhile; one that runs long is
 * time-sliced like a session's) and `cb` runs once after it, from the
 * loop, never from inside this function (held while a blocking call runs
 * the loop). It counts as a call in flight for ludo_runtime_run and
 * ludo_runtime_poll. ludo_script_free with a call in flight ends it: `cb`
 * runs inside the free with LUDO_ECANCELED (or with its outcome when that
 * had come). Returns 0, or LUDO_EINVAL (a NULL argument, a function name
 * of 128 bytes or more), LUDO_EBUSY (a call of this script, blocking or
 * not, is in flight), LUDO_ECLOSED (from that callback: the script is
 * being freed), LUDO_ETOOBIG (the input is over max_input_bytes),
 * LUDO_ENOMEM, in which case `cb` never runs. The call itself fails with
 * the codes of ludo_script_call, in `cb`. */
LUDO_EXTERN int ludo_script_call_async(ludo_script_t *sc, const char *fn,
                                       const char *args_json, size_t len,
                                       ludo_script_cb cb, void *ud);

/* Message of the script's last failed call. Never NULL. A CPU budget,
 * wall-clock limit or memory cap says where the Lua was and in which
 * function: "ETIMEOUT: ... (at mypolicy.lua:7) during ludo.policy.act".
 * Kept up to 16 KiB, as ludo_session_errmsg. */
LUDO_EXTERN const char *ludo_script_errmsg(const ludo_script_t *sc);

/* The script's last failed call in parts (see ludo_error_t; `call` and
 * `phase` are the function's name). Fills *err (borrowed until the next
 * call or ludo_script_free). Returns 0 or LUDO_EINVAL. */
LUDO_EXTERN int ludo_script_error(const ludo_script_t *sc,
                                  ludo_error_t *err);

/* Frees a script (before its runtime). Accepts NULL. Fine from its own
 * callback. A non-blocking call in flight ends with LUDO_ECANCELED (see
 * ludo_script_call_async). From inside that call's own Lua (a host
 * function it runs) the free is deferred: the Lua stops at its next
 * instruction, and as it returns to ludo the script is freed and `cb`
 * runs with LUDO_ECANCELED ("ECANCELED: the script was freed"); calls on
 * it meanwhile get LUDO_ECLOSED. While a blocking ludo_script_call of the
 * script runs (a host function of another session or script frees it
 * meanwhile), the free is deferred: that call ends with LUDO_ECANCELED
 * (a wait it is in is cancelled) and frees the script as it returns;
 * new calls get LUDO_ECLOSED until then. */
LUDO_EXTERN void ludo_script_free(ludo_script_t *sc);

/* ---- batched steps ---------------------------------------------------
 * The EnvPool send/recv model: n sessions, n actions, n results in one
 * call, for trainers and game loops that step many agents per frame.
 * `sessions` and `actions`/`lens` are arrays of n (borrowed for the call;
 * the non-blocking form copies the actions). A session may appear once
 * per batch. */

/* Blocking: runs every step (steps that wait overlap on the loop), then
 * calls `cb` once per session, in index order, with its status and result
 * (or error message), borrowed until `cb` returns. A session that cannot
 * step (busy, closed, twice in the batch, input over max_input_bytes)
 * gets its code (and its message) in `cb`; the rest of the batch still
 * runs. Every session of the batch is held until the batch returns: one
 * closed meanwhile (by a host function of an earlier entry, even before
 * its own step started) gets LUDO_ECANCELED and is torn down as the
 * batch returns; its callbacks (close_async's, or an async call's it
 * still owed) run from the loop afterwards. Returns 0 when `cb` ran for
 * every index, or LUDO_EINVAL / LUDO_EBUSY (from inside a host function
 * or callback) / LUDO_ECLOSED (from a callback that ludo_runtime_free
 * runs) / LUDO_ENOMEM, in which case `cb` never ran. */
LUDO_EXTERN int ludo_session_step_batch(ludo_session_t *const *sessions,
                                        const char *const *actions,
                                        const size_t *lens, size_t n,
                                        ludo_batch_cb cb, void *ud);

/* Non-blocking: queues every step on the loop; `cb` runs from the loop
 * for each session as its step completes. All or nothing: returns 0, or
 * LUDO_EINVAL / LUDO_EBUSY / LUDO_ECLOSED (some session cannot step, or
 * from a callback that ludo_runtime_free runs) / LUDO_ETOOBIG (an action
 * over max_input_bytes) / LUDO_ENOMEM, in which case no step was queued
 * and `cb` never runs. */
LUDO_EXTERN int ludo_session_step_batch_async(ludo_session_t *const *sessions,
                                              const char *const *actions,
                                              const size_t *lens, size_t n,
                                              ludo_batch_cb cb, void *ud);

/* ---- LLM usage (ludo.llm, docs/llm.md) --------------------------------
 * What the Lua of one session or script spent on LLM calls through
 * require("ludo.llm") since its state was opened (cumulative). A call is
 * one c:chat / c:complete; its retries are counted apart. latency_ms sums
 * the calls' wall time (queueing and retries included). The struct,
 * ludo_llm_usage_t, is in ludo_defs.h. */

/* Copies the usage of session `s` / script `sc` into *out. Returns 0, or
 * LUDO_EINVAL when an argument is NULL (then *out is untouched). Calls
 * still in flight are not counted yet. */
LUDO_EXTERN int ludo_session_llm_usage(const ludo_session_t *s,
                                       ludo_llm_usage_t *out);
LUDO_EXTERN int ludo_script_llm_usage(const ludo_script_t *sc,
                                      ludo_llm_usage_t *out);

/* ---- JSON ------------------------------------------------------------
 * ludo's strict JSON parser (RFC 8259; docs/json.md), the one sessions
 * decode with, for hosts that read JSON without building a tree. */

/* Parses the len bytes at `text` (borrowed; no NUL needed) as one JSON
 * text, calling `cb`'s callbacks with `ud` for each event (the struct is
 * in ludo_defs.h). Strict: one value with optional whitespace around it;
 * no comments, trailing commas, leading zeros, NaN or Infinity, raw
 * control characters, invalid UTF-8 or unpaired surrogates; an integer
 * must fit in int64_t and a real in a double. `max_depth` is the deepest
 * nesting of arrays and objects allowed (0: scalars only; below 0, or
 * above 1024: 1024). Allocates only a buffer for strings holding
 * escapes, freed before it returns. Returns 0; LUDO_EPARSE (malformed,
 * out of range, too deep), LUDO_ENOMEM, or LUDO_ECANCELED (a callback
 * returned nonzero), with *err filled in when err is not NULL; or
 * LUDO_EINVAL (text NULL with len > 0, or cb NULL). Callbacks may have
 * run for the part before an error. */
LUDO_EXTERN int ludo_json_parse(const char *text, size_t len, int max_depth,
                                const ludo_json_cb_t *cb, void *ud,
                                ludo_json_error_t *err);

#ifdef __cplusplus
}
#endif

#endif /* LUDO_H */
