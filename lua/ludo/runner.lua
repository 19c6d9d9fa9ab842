-- ludo.runner: the Lua half of a session. The C core loads the environment
-- module into a fresh sandboxed state, hands it to runner.init, and then
-- runs every call as runner.dispatch(kind) inside the session's coroutine,
-- reading the call's JSON input through ludo.core.input().
--
-- What a call does (see docs/environments.md):
--   reset(opts): seeds math.random from opts.seed (when given), sets the
--     episode id (opts.episode_id or a new UUID), zeroes step_count, resets
--     the rubric tree, calls env.reset(opts), applies the transform.
--   step(action): validates the action against the declared action schema
--     (error names the field), calls env.step(action), counts the step,
--     applies the transform, then the rubric: its score becomes `reward`
--     unless the step set one, and every rubric's last score is reported in
--     observation.metadata.rubrics ("total" for the root, dotted names for
--     the named descendants).
--   state(): env.state() (if any) completed with episode_id and step_count.
local core = require("ludo.core")
local schema = require("ludo.schema")
local null = require("ludo.null")

local M = {}

local RESET, STEP, STATE, CLOSE = 1, 2, 3, 4
M.RESET, M.STEP, M.STATE, M.CLOSE = RESET, STEP, STATE, CLOSE

local env            -- the environment module's table
local env_step, env_reset, env_state
local validate_action
local rubric, named  -- root rubric and its {name, rubric} pairs
local transform
local episode_id, step_count = nil, 0
local info

local input = core.input
local type, error, pairs = type, error, pairs

local function fail(code, fmt, ...)
  error(code .. ": " .. string.format(fmt, ...), 0)
end

local function callable(v)
  if type(v) == "function" then return true end
  local mt = getmetatable(v)
  return type(mt) == "table" and mt.__call ~= nil
end

-- Reads the environment module's declaration. `default_name` is used when
-- the module has no name (the folder or file name).
function M.init(mod, default_name)
  if type(mod) ~= "table" then
    fail("ELOAD", "the environment module must return a table, got %s",
      type(mod))
  end
  if type(mod.step) ~= "function" then
    fail("ELOAD", "the environment module has no step(action) function")
  end
  if mod.reset ~= nil and type(mod.reset) ~= "function" then
    fail("ELOAD", "reset must be a function")
  end
  if mod.state ~= nil and type(mod.state) ~= "function" then
    fail("ELOAD", "state must be a function")
  end
  env = mod
  env_step, env_reset, env_state = mod.step, mod.reset, mod.state
  local ok, action = pcall(schema.expand, mod.action, "action")
  if not ok then fail("ELOAD", "%s", action) end
  local ok2, observation = pcall(schema.expand, mod.observation,
    "observation")
  if not ok2 then fail("ELOAD", "%s", observation) end
  local ok3, state = pcall(schema.expand, mod.state_schema, "state_schema")
  if not ok3 then fail("ELOAD", "%s", state) end
  validate_action = mod.action ~= nil and schema.compile(action) or nil

  rubric = mod.rubric
  if rubric ~= nil and not callable(rubric) then
    fail("ELOAD", "rubric must be a rubric object or a function, got %s",
      type(rubric))
  end
  named = {}
  if rubric ~= nil and type(rubric) == "table"
      and type(rubric.named_rubrics) == "function" then
    named = rubric:named_rubrics()
  end
  transform = mod.transform
  if transform ~= nil and not callable(transform) then
    fail("ELOAD", "transform must be a function or a transform object")
  end
  local concurrent = mod.concurrent
  if concurrent == nil then concurrent = true end
  info = {
    name = mod.name or default_name or "Environment",
    description = mod.description
      or ((mod.name or default_name or "Environment") .. " environment"),
    version = mod.version or "1.0.0",
    author = mod.author or null,
    documentation_url = mod.documentation_url or null,
    readme_content = mod.readme or null,
    concurrent = concurrent and true or false,
    action = schema.clean(action),
    observation = schema.clean(observation),
    state = schema.clean(state),
  }
  return info
end

function M.info() return info end

local function observation_of(obs, what)
  if obs == nil then return {} end
  if type(obs) ~= "table" or obs == null then
    fail("ESCRIPT", "%s must return an observation table, got %s", what,
      type(obs))
  end
  return obs
end

local function apply_transform(obs, action)
  if transform == nil then return obs end
  return observation_of(transform(obs, action), "the transform")
end

local function reset(opts)
  if opts == nil or opts == null then opts = {} end
  if type(opts) ~= "table" then
    fail("ESCHEMA", "reset options must be a JSON object, got %s",
      type(opts))
  end
  local seed = opts.seed
  if seed ~= nil and seed ~= null then
    if math.type(seed) ~= "integer" then
      fail("ESCHEMA", "reset.seed: expected integer, got %s",
        math.type(seed) or type(seed))
    end
    math.randomseed(seed)
  else
    math.randomseed()
  end
  local eid = opts.episode_id
  if eid ~= nil and eid ~= null then
    if type(eid) ~= "string" then
      fail("ESCHEMA", "reset.episode_id: expected string, got %s", type(eid))
    end
    episode_id = eid
  else
    episode_id = core.uuid()
  end
  step_count = 0
  if rubric ~= nil and type(rubric) == "table" and rubric.reset then
    rubric:reset()
  end
  local obs = {}
  if env_reset ~= nil then obs = observation_of(env_reset(opts), "reset") end
  obs = apply_transform(obs, nil)
  if obs.done == nil then obs.done = false end
  return obs
end

local function step(action)
  if action == nil then action = {} end
  if validate_action ~= nil then
    local ok, err = validate_action(action, "action")
    if not ok then error("ESCHEMA: " .. err, 0) end
  end
  local obs = observation_of(env_step(action), "step")
  step_count = step_count + 1
  if transform ~= nil then obs = apply_transform(obs, action) end
  if rubric ~= nil then
    local score = rubric(action, obs)
    if obs.reward == nil then obs.reward = score end
    local md = obs.metadata
    if md == nil or md == null then
      md = {}
      obs.metadata = md
    end
    local scores = { total = score }
    for i = 1, #named do
      local e = named[i]
      local s = e[2].last_score
      if s == nil then s = null end
      scores[e[1]] = s
    end
    md.rubrics = scores
  end
  if obs.done == nil then obs.done = false end
  return obs
end

local function state()
  local st = env_state ~= nil and env_state() or nil
  if st == nil then st = {} end
  if type(st) ~= "table" then
    fail("ESCRIPT", "state must return a table, got %s", type(st))
  end
  if st.episode_id == nil or st.step_count == nil then
    local copy = {}
    for k, v in pairs(st) do copy[k] = v end
    if copy.episode_id == nil then copy.episode_id = episode_id or null end
    if copy.step_count == nil then copy.step_count = step_count end
    st = copy
  end
  return st
end

-- Runs one call. The C core resumes this in the session's coroutine.
function M.dispatch(kind)
  if kind == STEP then return step(input()) end
  if kind == RESET then return reset(input()) end
  if kind == STATE then return state() end
  if kind == CLOSE then
    if type(env.close) == "function" then env.close() end
    return nil
  end
  fail("EINVAL", "unknown call kind %s", tostring(kind))
end

return M
