-- ludo.runner: the Lua half of a session. The C core loads the environment
-- module into a fresh sandboxed state, hands it to runner.init, and then
-- runs every call as runner.dispatch(kind) inside the session's coroutine,
-- reading the call's JSON input through ludo.core.input(); a step is a C
-- function that init builds from the runner's parts (see M.init). It
-- is kept small on purpose: every session state holds its code.
--
-- What a call does (see docs/environments.md):
--   reset(opts): opts are checked by the C validator (`seed` integer,
--     `episode_id` string); seeds math.random from opts.seed (else
--     randomly), sets the episode id (opts.episode_id or a new UUID), zeroes
--     step_count, resets the rubric tree, calls env.reset(opts), applies
--     the transform.
--   step(action): validates the action against the declared action schema
--     (in C; the error names the field), calls env.step(action), counts the
--     step, applies the transform, then the rubric, and returns the
--     observation and the rubric's score. The C core writes the result:
--     the score becomes `reward` unless the step set one, and every
--     rubric's last score is reported in metadata.rubrics under its path
--     (named_rubrics). An error in the rubric names the rubric that failed
--     (ludo.rubric).
--   state(): env.state() (if any) completed with episode_id and step_count.
--   tools: with env.tools declared, a step action {"type":"list_tools"}
--     or {"type":"call_tool","tool_name":..,"arguments":{..}} (OpenEnv's
--     MCP actions) runs the tool instead of env.step: the observation is
--     {tools = [...]} or {tool_name, result, error}, with no reward, no
--     transform and no rubric; the step still counts. Call 5 (the C API's
--     ludo_session_call_tool, JSON-RPC tools/call) runs a tool by name and
--     returns MCP's CallToolResult.
--   tasks: with env.tasks declared, call 6 (ludo_session_tasks, the
--     server's Task API) answers a tasks request, and a reset whose
--     options name a split (and an index) gets that task as opts.task
--     (ludo.tasks and ludo.tasks_api, loaded into a state the first time
--     it needs them).
local core = require("ludo.core")
local null = require("ludo.null")

local M = {}

local env_step, env_reset, env_state, env_close, env_name
local check_action, check_reset, rubric, transform, raise, settle
local action_decl
-- The {name, rubric} pairs init returned; `stamp` is the step's stamp
-- (ludo.rubric "Step stamps"), which the C core compares to each rubric's.
local named_rubrics
-- The environment's tools: `tools_load` (nil without tools) binds them on
-- first use, so a session that never calls one never loads their code.
local tools, tools_load, tools_decl

local function bound_tools()
  if not tools then
    local checks, list, toolmod = tools_load()
    tools = toolmod.bind(tools_decl, checks, list, raise)
  end
  return tools
end
local tasks -- tasks(kind) gives ludo.tasks(_api) bound to the module's
local episode_id
local input, type, error = core.input, type, error

-- What the call is running, for the C core's error messages ("... during
-- the rubric of step"): 0 the environment's own code, 1 the transform,
-- 2 the rubric. The core reads doing[1] when a call fails. doing[2] is
-- the episode's step count (STEPS), which the step (in C) adds to.
local STEPS = 2
local doing = { 0, 0 }
M.doing = doing

-- Raises unless `obs` is an observation table; nil means an empty one.
-- The message names the environment: a CLI or a server may run several.
local function observation(obs, what)
  if obs == nil then return {} end
  if type(obs) ~= "table" or obs == null then
    error("ESCRIPT: " .. what .. " of environment " .. env_name
      .. " must return an observation table, got "
      .. (obs == null and "null" or type(obs)), 0)
  end
  return obs
end

local function checked(check, value)
  local ok, err = check(value)
  if not ok then raise("ESCHEMA", err, 0) end
end

-- The trajectory rubrics of the tree ({name, rubric}; nil when none): at
-- the end of an episode their discounted step rewards are reported.
local trajectories

local function add_trajectory(name, r)
  if type(r) == "table" and type(r.compute_step_rewards) == "function"
    and type(r.is_done) == "function" then
    trajectories = trajectories or {}
    trajectories[#trajectories + 1] = { name, r }
  end
end

-- At the end of an episode (`obs` done, as trajectory rubrics see it):
-- metadata.step_rewards = {[name] = {r1, ..., rT}} for each trajectory
-- rubric, its compute_step_rewards() (discounted per step).
local function report_step_rewards(obs)
  if not trajectories[1][2].is_done(obs) then return end
  local md = obs.metadata
  if type(md) ~= "table" or md == null then
    md = {}
    obs.metadata = md
  end
  local out = {}
  for i = 1, #trajectories do
    local t = trajectories[i]
    out[t[1]] = t[2]:compute_step_rewards()
  end
  md.step_rewards = out
end

-- The action's optional fields given as null (as typed clients send an
-- unset Optional field; the schema takes it) reach step as nil, as if
-- left out: the step asks action_nulls() at its first checked step for
-- the function that drops them (false when the declaration has none:
-- ludo.schema.nulls).
local function action_nulls()
  local schema = require("ludo.schema")
  local fields, drop = schema.nulls(action_decl), schema.drop_nulls
  return fields and function(action) drop(action, fields) end or false
end

-- A tool action (a step whose action is {"type":"list_tools"} or
-- {"type":"call_tool",...}): the observation of ludo.tools.
local function tool_step(action)
  return bound_tools().step(action)
end

-- Binds the session to the environment module `mod` (already checked by
-- ludo.envinfo in the probe state). `action`/`reset` are the C validators
-- of the action schema (or nil) and of the reset options; `raiser` raises
-- ludo error objects (raiser(code, text, level)), which only the C core
-- can hand out; `name` is the environment's default name (its folder).
-- `checks` maps each tool's name to the C validator of its arguments,
-- `tools` (nil without tools) returns, when first called, the map of each
-- tool's name to the C validator of its arguments, the tool list as JSON
-- and the ludo.tools module; `load`
-- gives the modules of tasks bound to the module's (nil without tasks):
-- load(1) ludo.tasks for reset, load(6) ludo.tasks_api for call 6.
-- `make_step` builds the step from the runner's parts (see M.step below).
-- Returns the rubric's {name, rubric} pairs (named_rubrics, in tree
-- order), from which the C core reports scores; its `stamp` field is the
-- step's stamp, which tells the rubrics the step called.
function M.init(mod, action, reset, raiser, name, tools_loader, load,
  make_step)
  env_step, env_reset, env_state, env_close =
    mod.step, mod.reset, mod.state, mod.close
  env_name = tostring(mod.name or name)
  check_action, check_reset, raise = action, reset, raiser
  action_decl = mod.action
  rubric, transform = mod.rubric, mod.transform
  tools_load, tools_decl = tools_loader, mod.tools
  tasks = load
  local named = {}
  if type(rubric) == "table" and type(rubric.named_rubrics) == "function"
  then
    for path, r in rubric:named_rubrics() do
      -- metadata.rubrics.total is the root's score: a child of that name
      -- would write a second "total" key, and readers keep either one.
      if path == "total" then
        raise("ELOAD", "rubric: a child rubric may not be named 'total' "
          .. "(metadata.rubrics.total is the root's score); rename it", 0)
      end
      named[#named + 1] = { path, r }
    end
    settle = rubric.new_step
    named_rubrics = named
    trajectories = nil
    add_trajectory("total", rubric)
    for i = 1, #named do add_trajectory(named[i][1], named[i][2]) end
  end
  -- A step (call 2) is a C function built from the runner's parts
  -- (make_step, which the core hands to init alone: runtime/script/
  -- lstep.h; a session's code cannot make one; the parts in its
  -- order, as arguments: a table of them would be garbage of every
  -- session's build). It reads the action (core.input), runs a tool action
  -- through tool_step (no reward, no transform, no rubric; the step
  -- counts), else validates the action against the declared action schema
  -- (in C; the error names the field), drops its null optional fields,
  -- calls env.step(action), counts the step, applies the transform, then
  -- the rubric (starting the step's stamp first, so that metadata.rubrics
  -- tells the rubrics called: see ludo.rubric; an error in the rubric
  -- names the rubric that failed), and reports the trajectory rubrics'
  -- step rewards at the end of an episode. It returns the observation and
  -- the rubric's score (a mark for a tool's observation: the C core
  -- neither scores it nor checks it against the schema). The C core
  -- starts a step with M.step, without dispatch.
  M.step = make_step(doing, input, env_step, check_action,
    action_nulls, tools_load and tool_step, transform, rubric, settle,
    named_rubrics, trajectories and report_step_rewards, raise, env_name)
  return named
end

local function reset(opts)
  if opts == nil or opts == null then opts = {} end
  checked(check_reset, opts)
  if tasks and (opts.split ~= nil or opts.index ~= nil) then
    tasks(1).select(opts)
  end
  local seed, eid = opts.seed, opts.episode_id
  if seed ~= nil and seed ~= null then
    math.randomseed(seed)
  else
    math.randomseed()
  end
  -- The old episode ends here; the new one has its id once everything
  -- below succeeded: after a reset that failed, state() says there is no
  -- episode (episode_id null) instead of naming one that never started.
  local new_id = (eid ~= nil and eid ~= null) and eid or core.uuid()
  episode_id, doing[STEPS] = nil, 0
  if type(rubric) == "table" and rubric.reset then
    doing[1] = 2
    rubric:reset()
    doing[1] = 0
  end
  local obs = env_reset and observation(env_reset(opts), "reset") or {}
  if transform then
    doing[1] = 1
    obs = observation(transform(obs), "the transform")
  end
  episode_id = new_id
  return obs
end

-- ---- calls -------------------------------------------------------------

local function state()
  local st = env_state and env_state() or {}
  if type(st) ~= "table" then
    error("ESCRIPT: state must return a table, got " .. type(st), 0)
  end
  if rawget(st, 1) ~= nil then
    error("ESCRIPT: state of environment " .. env_name .. " must return a "
      .. "table of named fields (an object), got an array", 0)
  end
  local eid, n = st.episode_id, st.step_count
  if eid == nil or n == nil then
    local copy = { episode_id = episode_id or null,
      step_count = doing[STEPS] }
    for k, v in pairs(st) do copy[k] = v end
    st, eid, n = copy, copy.episode_id, copy.step_count
  end
  -- OpenEnv's State: clients parse these two fields by its types
  if eid ~= null and type(eid) ~= "string" then
    error("ESCRIPT: state of environment " .. env_name .. ": episode_id "
      .. "must be a string or nil (the runtime's), got " .. type(eid), 0)
  end
  if math.type(n) ~= "integer" or n < 0 then
    error("ESCRIPT: state of environment " .. env_name .. ": step_count "
      .. "must be an integer >= 0 or nil (the runtime's), got "
      .. (math.type(n) == "integer" and n or math.type(n) or type(n)), 0)
  end
  return st
end

-- Runs one call (1 reset, 2 step, 3 state, 4 close, 5 tool, 6 tasks) in
-- the session's coroutine. (The C core starts a step with M.step.)
function M.dispatch(kind)
  doing[1] = 0
  if kind == 2 then return M.step() end
  if kind == 1 then return reset((input())) end
  if kind == 3 then return state() end
  if kind == 5 then
    if not tools_load then
      raise("ENOENT", "environment " .. env_name .. " has no tools", 0)
    end
    return bound_tools().call((input()))
  end
  if kind == 6 then -- only with tasks (the C core checks)
    return tasks(6).call((input()))
  end
  if env_close then env_close() end
end
return M
