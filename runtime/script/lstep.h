/* lstep.h - the runner's step in C (the runner's make_step).
 *
 * ludo.runner's step (lua/ludo/runner.lua, docs/environments.md) is what
 * every step of every session runs. Written in Lua, it read a dozen of
 * the runner's locals, each an upvalue: a separate object of its own in
 * the session's memory, so a step touched a dozen cache lines for them
 * alone, a fifth of a no-op step's lines (docs/performance.md, "Session
 * 37"). This C closure holds the same values inline, as its own upvalues
 * (one object), and runs the same step: the action decoded and checked,
 * tool actions handed to the tools, the environment's step, the count,
 * the transform, the rubric with its stamp, the trajectory report. Every
 * Lua function it calls is called with a continuation, so any of them
 * may yield (waits, time slices). The messages and error codes are the
 * runner's. */
#ifndef LUDO_SCRIPT_LSTEP_H
#define LUDO_SCRIPT_LSTEP_H

#include <lua.h>

/* make_step(doing, input, step, check, nulls, tools, transform, rubric,
 * settle, named, report, raise, name) -> the step function, from the
 * runner's parts. The core hands it to ludo.runner's init alone
 * (env/env.c), never to a session's modules: a step made elsewhere would
 * count steps in a table of the script's own. The parts:
 *   doing      the runner's table: doing[1] what runs (0 the environment,
 *              1 the transform, 2 the rubric), doing[2] the episode's
 *              step count (the step adds 1)
 *   input      ludo.core.input
 *   step       the environment's step(action) -> observation
 *   check      the action's C validator (check(action) -> ok, err), or nil
 *   nulls      with check: nulls() -> a function dropping the action's
 *              null optional fields, drop(action), or false when the
 *              schema has none (asked at the first checked step)
 *   tools      with tools: tools(action) -> observation, for an action
 *              whose `type` is "list_tools" or "call_tool"; or nil
 *   transform  transform(obs, action) -> observation, or nil
 *   rubric     rubric(action, obs) -> score, or nil
 *   settle     with rubric, or nil: settle() -> the step's stamp, stored
 *              as named.stamp
 *   named      the runner's {name, rubric} pairs (with settle)
 *   report     report(obs), after the rubric, or nil
 *   raise      the error raiser (raise(code, text, level))
 *   name       the environment's name, for messages
 * The step function takes no arguments and returns the observation and
 * the rubric's score (nothing without a rubric; the tool mark for a tool's
 * observation). Raises when a part has the wrong type. */
int ludo__lstep_new(lua_State *L);

/* 1 when the value at idx is what a tool action's step returns in the
 * score's place (the result's encoder then neither scores its observation
 * nor checks it against the observation schema). A rubric's score is
 * never taken for it: any score that is not a number or nil is refused
 * there, booleans included. [-0, +0, -] */
int ludo__lstep_is_tool_mark(lua_State *L, int idx);

#endif
