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
--     rubric's last score is reported in metadata.rubrics.
--   state(): env.state() (if any) completed with episode_id and step_count.
local core = require("ludo.core")
local null = require("ludo.null")

local M = {}

local env_step, env_reset, env_state, env_close, env_name
local check_action, check_reset, rubric, transform, raise
local episode_id, step_count = nil, 0
local input, type, error = core.input, type, error

-- What the call is running, for the C core's error messages ("... during
-- the rubric of step"): 0 the environment's own code, 1 the transform,
-- 2 the rubric. The core reads doing[1] when a call fails.
local doing = { 0 }
M.doing = doing

-- Raises unless `obs` is an observation table; nil means an empty one.
local function observation(obs, what)
  if obs == nil then return {} end
  if type(obs) ~= "table" or obs == null then
    error("ESCRIPT: " .. what .. " must return an observation table, got "
      .. type(obs), 0)
  end
  return obs
end

local function checked(check, value)
  local ok, err = check(value)
  if not ok then raise("ESCHEMA", err, 0) end
end

-- Binds the session to the environment module `mod` (already checked by
-- ludo.envinfo in the probe state). `action`/`reset` are the C validators
-- of the action schema (or nil) and of the reset options; `raiser` raises
-- ludo error objects (raiser(code, text, level)), which only the C core
-- can hand out; `name` is the environment's default name (its folder).
-- Returns the rubric's {name, rubric} pairs, from which the C core reports
-- scores.
function M.init(mod, action, reset, raiser, name)
  env_step, env_reset, env_state, env_close =
    mod.step, mod.reset, mod.state, mod.close
  env_name = tostring(mod.name or name)
  check_action, check_reset, raise = action, reset, raiser
  rubric, transform = mod.rubric, mod.transform
  if type(rubric) == "table" and type(rubric.named_rubrics) == "function"
  then
    return rubric:named_rubrics()
  end
  return {}
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

local function step(action)
  if action == nil then action = {} end
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
    doing[1] = 2
    return obs, rubric(action, obs)
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

-- Runs one call (1 reset, 2 step, 3 state, 4 close) in the session's
-- coroutine.
function M.dispatch(kind)
  doing[1] = 0
  if kind == 2 then return step(input()) end
  if kind == 1 then return reset(input()) end
  if kind == 3 then return state() end
  if env_close then env_close() end
end

return M
