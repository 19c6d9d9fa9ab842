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
--     applies the transform, then the rubric, and returns the observation
--     and the rubric's score. The C core writes the result: the score
--     becomes `reward` unless the step set one, and every rubric's last
--     score is reported in metadata.rubrics ("total" for the root, dotted
--     names for the named descendants), without building Lua tables.
--   state(): env.state() (if any) completed with episode_id and step_count.
local core = require("ludo.core")
local json = require("ludo.json")
local null = require("ludo.null")

local M = {}

local RESET, STEP, STATE, CLOSE = 1, 2, 3, 4

local env_step, env_reset, env_state, env_close
local validate_action
local rubric, named  -- root rubric and its {name, rubric} pairs
local transform
local episode_id, step_count = nil, 0

local input = core.input
local type, error, pairs = type, error, pairs

local function fail(code, fmt, ...)
  error(code .. ": " .. string.format(fmt, ...), 0)
end

-- Binds the session to the environment module `mod` (already checked by
-- ludo.envinfo in the probe state). `validate` is the C validator of the
-- declared action schema, or nil. Returns the rubric's {name, rubric}
-- pairs, from which the C core reports every named rubric's last score.
function M.init(mod, validate)
  env_step, env_reset, env_state, env_close =
    mod.step, mod.reset, mod.state, mod.close
  validate_action = validate
  rubric = mod.rubric
  named = {}
  if type(rubric) == "table" and type(rubric.named_rubrics) == "function"
  then
    named = rubric:named_rubrics()
  end
  transform = mod.transform
  return named
end



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
  if type(opts) ~= "table" or json.is_array(opts) then
    fail("ESCHEMA", "reset options must be a JSON object, got %s",
      json.is_array(opts) and "array" or type(opts))
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
  return apply_transform(obs, nil)
end

local function step(action)
  if action == nil then action = {} end
  if validate_action ~= nil then
    local ok, err = validate_action(action)
    if not ok then error("ESCHEMA: " .. err, 0) end
  end
  local obs = env_step(action)
  if type(obs) ~= "table" or obs == null then
    obs = observation_of(obs, "step")
  end
  step_count = step_count + 1
  if transform ~= nil then obs = apply_transform(obs, action) end
  if rubric ~= nil then return obs, rubric(action, obs) end
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
    if env_close ~= nil then env_close() end
    return nil
  end
  fail("EINVAL", "unknown call kind %s", tostring(kind))
end

return M
