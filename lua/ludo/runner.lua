-- ludo.runner: the Lua half of a session. The C core loads the environment
-- module into a fresh sandboxed state, hands it to runner.init, and then
-- runs every call as runner.dispatch(kind) inside the session's coroutine,
-- reading the call's JSON input through ludo.core.input(). It is kept
-- small on purpose: every session state holds its code.
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
local core = require("ludo.core")
local null = require("ludo.null")
local json = require("ludo.json")

local M = {}

local env_step, env_reset, env_state, env_close, env_name
local check_action, check_reset, rubric, transform, raise, settle
local tool_checks, tool_runs, tools_json
local episode_id, step_count = nil, 0
local input, type, error = core.input, type, error

-- What the call is running, for the C core's error messages ("... during
-- the rubric of step"): 0 the environment's own code, 1 the transform,
-- 2 the rubric. The core reads doing[1] when a call fails.
local doing = { 0 }
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

-- Binds the session to the environment module `mod` (already checked by
-- ludo.envinfo in the probe state). `action`/`reset` are the C validators
-- of the action schema (or nil) and of the reset options; `raiser` raises
-- ludo error objects (raiser(code, text, level)), which only the C core
-- can hand out; `name` is the environment's default name (its folder).
-- `checks` maps each tool's name to the C validator of its arguments and
-- `list` is the JSON of the tool list (both nil without tools).
-- Returns the rubric's {name, rubric} pairs (named_rubrics, in tree
-- order), from which the C core reports scores.
function M.init(mod, action, reset, raiser, name, checks, list)
  env_step, env_reset, env_state, env_close =
    mod.step, mod.reset, mod.state, mod.close
  env_name = tostring(mod.name or name)
  check_action, check_reset, raise = action, reset, raiser
  rubric, transform = mod.rubric, mod.transform
  if checks then
    tool_checks, tools_json, tool_runs = checks, list, {}
    for k, t in pairs(mod.tools) do
      tool_runs[type(k) == "string" and k or t.name] = t.run
    end
  end
  local named = {}
  if type(rubric) == "table" and type(rubric.named_rubrics) == "function"
  then
    for path, r in rubric:named_rubrics() do
      named[#named + 1] = { path, r }
    end
    settle = rubric.call_context
    trajectories = nil
    add_trajectory("total", rubric)
    for i = 1, #named do add_trajectory(named[i][1], named[i][2]) end
  end
  return named
end

local function reset(opts)
  if opts == nil or opts == null then opts = {} end
  checked(check_reset, opts)
  local seed, eid = opts.seed, opts.episode_id
  if seed ~= nil and seed ~= null then
    math.randomseed(seed)
  else
    math.randomseed()
  end
  episode_id = (eid ~= nil and eid ~= null) and eid or core.uuid()
  step_count = 0
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
  return obs
end

-- ---- tools -------------------------------------------------------------

-- Whether v encodes as a JSON object (a decoded array has the array
-- metatable; a plain sequence encodes as an array too).
local function is_object(v)
  return type(v) == "table" and getmetatable(v) == nil and v[1] == nil
end

local ACTION_FIELDS = {
  list_tools = { type = true, metadata = true },
  call_tool = { type = true, metadata = true, tool_name = true,
    arguments = true },
}

-- Checks the shape of a list_tools / call_tool action (OpenEnv's
-- ListToolsAction and CallToolAction, which forbid unknown fields).
local function check_tool_action(a)
  local fields = ACTION_FIELDS[a.type]
  for k in pairs(a) do
    if not fields[k] then
      raise("ESCHEMA", "action." .. tostring(k) .. ": unknown field for a "
        .. a.type .. " action", 0)
    end
  end
  if a.metadata ~= nil and not is_object(a.metadata) then
    raise("ESCHEMA", "action.metadata: expected object", 0)
  end
  if a.type == "call_tool" then
    if type(a.tool_name) ~= "string" then
      raise("ESCHEMA", "action.tool_name: " .. (a.tool_name == nil
        and "required" or "expected string"), 0)
    end
    if a.arguments ~= nil and not is_object(a.arguments) then
      raise("ESCHEMA", "action.arguments: expected object", 0)
    end
  end
end

-- MCP's CallToolResult of a tool's return value, in OpenEnv's field names
-- (and MCP's own, when `mcp` is set): text content, and the structured
-- content (the value itself when it is an object, else {result = value}).
local function tool_result(value, mcp)
  local content = json.array()
  if value == nil then value = null end
  if value ~= null then
    local text = value
    if type(value) == "table" then
      local err
      text, err = json.encode(value)
      if not text then raise("EVALUE", "the tool's result: " .. err, 0) end
    elseif type(value) ~= "string" then
      text = tostring(value)
    end
    -- MCP clients refuse null annotations; OpenEnv's clients show them.
    content[1] = mcp and { type = "text", text = text }
      or { type = "text", text = text, annotations = null, meta = null }
  end
  local sc = is_object(value) and value or { result = value }
  local r = { content = content, structured_content = sc, meta = null,
    data = value, is_error = false }
  if mcp then
    r.structuredContent, r.isError = sc, false
  end
  return r
end

-- Runs tool `name`: true, result; or false, error_type, message for an
-- unknown tool or arguments that do not match its schema.
local function run_tool(name, args, mcp)
  local check = tool_checks[name]
  if not check then
    return false, "tool_not_found", "Tool '" .. name .. "' not found"
  end
  if args == nil then args = {} end
  local ok, err = check(args)
  if not ok then return false, "invalid_args", err end
  return true, tool_result(tool_runs[name](args), mcp)
end

-- A step whose action is list_tools or call_tool: the observation, and
-- false where a step returns the rubric's score (the C core then neither
-- scores the observation nor checks it against the declared schema).
local function tool_step(action)
  check_tool_action(action)
  step_count = step_count + 1
  if action.type == "list_tools" then
    return { tools = json.decode(tools_json) }, false
  end
  local name = action.tool_name
  local ok, res, why, msg = pcall(run_tool, name, action.arguments)
  if ok and res then
    return { tool_name = name, result = why, error = null }, false
  end
  if not ok then -- the tool raised
    msg = type(res) == "string" and res or tostring(res)
    if msg:find("^ETIMEOUT") or msg:find("^ECANCELED")
      or msg == "not enough memory" then
      error(res, 0) -- limits are the call's, not the tool's
    end
    why = "execution_error"
  end
  return { tool_name = name, result = null,
    error = { error_type = why, message = msg } }, false
end

-- Call 5: {"name": ..., "arguments": {...}} -> CallToolResult.
local function call_tool(req)
  if not is_object(req) or type(req.name) ~= "string" then
    raise("ESCHEMA", "the tool call needs a \"name\" string", 0)
  end
  if not tool_checks then
    raise("ENOENT", "environment " .. env_name .. " has no tools", 0)
  end
  if req.arguments ~= nil and not is_object(req.arguments) then
    raise("ESCHEMA", "arguments: expected object", 0)
  end
  local ok, res, msg = run_tool(req.name, req.arguments, true)
  if ok then return res end
  raise(res == "tool_not_found" and "ENOENT" or "ESCHEMA", msg, 0)
end

-- ---- calls -------------------------------------------------------------

local function step(action)
  if action == nil then action = {} end
  if tool_checks and type(action) == "table"
    and ACTION_FIELDS[action.type] then
    return tool_step(action)
  end
  if check_action then checked(check_action, action) end
  local obs = env_step(action)
  if type(obs) ~= "table" or obs == null then
    if obs == nil then
      error("ESCRIPT: step of environment " .. env_name .. " returned "
        .. "nothing; it must return an observation table", 0)
    end
    obs = observation(obs, "step")
  end
  step_count = step_count + 1
  if transform then
    doing[1] = 1
    obs = observation(transform(obs, action), "the transform")
  end
  if rubric ~= nil then
    -- Forget a rubric call that a stopped step left in progress, so that
    -- errors name the rubric that failed (see ludo.rubric).
    if settle then settle(nil) end
    doing[1] = 2
    local score = rubric(action, obs)
    if trajectories then report_step_rewards(obs) end
    return obs, score
  end
  return obs
end

local function state()
  local st = env_state and env_state() or {}
  if type(st) ~= "table" then
    error("ESCRIPT: state must return a table, got " .. type(st), 0)
  end
  if st.episode_id == nil or st.step_count == nil then
    local copy = { episode_id = episode_id or null, step_count = step_count }
    for k, v in pairs(st) do copy[k] = v end
    st = copy
  end
  return st
end

-- Runs one call (1 reset, 2 step, 3 state, 4 close, 5 tool) in the
-- session's coroutine.
function M.dispatch(kind)
  doing[1] = 0
  if kind == 2 then return step(input()) end
  if kind == 1 then return reset(input()) end
  if kind == 3 then return state() end
  if kind == 5 then return call_tool(input()) end
  if env_close then env_close() end
end

return M
