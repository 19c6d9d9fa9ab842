-- ludo.policy: drives an agent policy for `ludo run` as a script (its own
-- sandboxed state, never the environment's; see ludo_script_open). A
-- policy module returns a table with act(observation, context) -> action,
-- or is itself that function; optional reset(observation, result) at the
-- start of each episode. context = {reward, done, step, seed, result}.
-- Without a policy, a random one draws actions that satisfy the declared
-- action schema.
local json = require("ludo.json")
local null = require("ludo.null")

local M = {}

local WORDS = { "hello", "ludo", "agent", "reward", "step", "echo", "grid",
  "policy", "world", "lua" }

local function random_value(s, depth)
  depth = depth or 0
  if type(s) ~= "table" then return null end
  if s.const ~= nil then return s.const end
  if s.enum ~= nil then return s.enum[math.random(#s.enum)] end
  local choices = s.anyOf or s.oneOf
  if choices then return random_value(choices[math.random(#choices)], depth) end
  local t = s.type
  if type(t) == "table" then t = t[math.random(#t)] end
  if t == nil then t = s.properties and "object" or "string" end
  if t == "object" then
    local out, required = {}, {}
    for _, k in ipairs(s.required or {}) do required[k] = true end
    local names = {}
    for k in pairs(s.properties or {}) do names[#names + 1] = k end
    table.sort(names)
    for _, k in ipairs(names) do
      if required[k] or (depth < 3 and math.random() < 0.5) then
        out[k] = random_value(s.properties[k], depth + 1)
      end
    end
    return out
  elseif t == "array" then
    local out = json.array()
    local lo = s.minItems or 0
    local hi = math.max(lo, math.min(s.maxItems or 3, lo + 3))
    for i = 1, math.random(lo, hi) do
      out[i] = random_value(s.items, depth + 1)
    end
    return out
  elseif t == "integer" then
    local lo = s.minimum or 0
    local hi = s.maximum or (lo + 10)
    if math.ceil(lo) > math.floor(hi) then
      error("the random policy: the action schema's integer range "
        .. "[" .. lo .. ", " .. hi .. "] holds no integer", 0)
    end
    return math.random(math.ceil(lo), math.floor(hi))
  elseif t == "number" then
    local lo = s.minimum or 0
    local hi = s.maximum or (lo + 1)
    if lo > hi then
      error("the random policy: the action schema's number range "
        .. "[" .. lo .. ", " .. hi .. "] is empty", 0)
    end
    return lo + (hi - lo) * math.random()
  elseif t == "boolean" then
    return math.random() < 0.5
  elseif t == "null" then
    return null
  end
  local w = WORDS[math.random(#WORDS)]
  if s.maxLength and #w > s.maxLength then w = w:sub(1, s.maxLength) end
  return w
end
M.random_value = random_value

local act, on_reset, action_schema
local seed

-- Sets the policy up. `name` is the policy's module name (nil for the
-- random policy), required here so its top level runs under the script's
-- budget; `info` is the environment's description.
function M.init(name, info)
  action_schema = info.action
  local mod = nil
  if name ~= nil and name ~= null then mod = require(name) end
  if mod == nil then
    act = function() return random_value(action_schema) end
  elseif type(mod) == "function" then
    act = mod
  elseif type(mod) == "table" and type(mod.act) == "function" then
    act = mod.act
    on_reset = mod.reset
  else
    error("a policy returns act(observation, context) or a table with act",
      0)
  end
end

-- Starts an episode: seeds the policy's random numbers and hands the reset
-- result to the policy's reset(observation, result), if any.
function M.reset(episode_seed, result)
  seed = episode_seed ~= null and episode_seed or nil
  if seed then math.randomseed(seed) end
  if on_reset then on_reset(result.observation, result) end
end

-- The policy's next action for the last result. `context` carries the
-- previous reward, done flag, step index and the episode's seed.
function M.act(result, context)
  context.seed = seed
  context.result = result
  return act(result.observation, context)
end

-- context.result of act_text, decoded from the result's text when first
-- read; the context is a plain table again from then on. Its observation
-- is the one act got (the same table, as with M.act).
local function decode_result(context)
  local mt = getmetatable(context)
  local result = json.decode(mt[1]) -- may raise (the memory cap): then
  setmetatable(context, nil)         -- the context stays as it was
  if type(result) == "table" and mt[2] ~= nil then
    result.observation = mt[2]
  end
  context.result = result
  return result
end

local lazy_index = function(context, k)
  if k == "result" then return decode_result(context) end
end

local lazy_pairs = function(context)
  decode_result(context)
  return next, context, nil
end

-- As M.act, for a runner that has the result as JSON text and its
-- observation decoded (`ludo eval`, `ludo run`): the context's fields come
-- as arguments (reward and err null when there are none; a table made
-- here costs a tenth of one decoded from JSON), and context.result is
-- decoded only when the policy reads it (most read the observation alone,
-- and decoding the whole result cost more than the echo step itself).
-- Until then `result` is missing from rawget and next(context);
-- context.result and pairs(context) see it.
-- Without `observation` (the runner could not find it in the text, or
-- there is none) the whole result is decoded here, as M.act would have it.
function M.act_text(step, reward, err, text, observation)
  local context = { step = step, done = false, seed = seed,
    reward = reward ~= null and reward or nil,
    error = err ~= null and err or nil }
  if observation == nil then return M.act(json.decode(text), context) end
  setmetatable(context, { text, observation, __index = lazy_index,
    __pairs = lazy_pairs })
  return act(observation, context)
end

return M
