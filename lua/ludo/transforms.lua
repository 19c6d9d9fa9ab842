-- ludo.transforms: observation transforms (OpenEnv's Transform family).
--
--   local T = require("ludo.transforms")
--   local R = require("ludo.rubrics")
--   env.transform = T.Compose{
--     function(obs, action) obs.text = obs.text:lower(); return obs end,
--     T.Reward(my_rubric),       -- sets obs.reward = my_rubric(action, obs)
--   }
--
-- Call convention (ludo differs from OpenEnv here): a transform is called
-- as `t(observation, action) -> observation`. OpenEnv transforms take only
-- the observation; ludo's runner also passes the action that produced it,
-- so a transform can compute a reward (Reward). Transforms that do not
-- need the action simply ignore the second argument. A transform returns
-- the observation (the same table, modified, or a new one); returning nil
-- is an error. Anything callable is a transform: a plain Lua function
-- function(obs, action) works wherever a transform is accepted, and so do
-- instances of Transform subclasses, which implement apply(obs, action).
local class = require("ludo.class")

local type, error, getmetatable, format, select =
  type, error, getmetatable, string.format, select

local M = {}

-- Returns true when `t` can be used as a transform (it is callable).
function M.is_transform(t)
  if type(t) == "function" then return true end
  local mt = getmetatable(t)
  return type(mt) == "table" and mt.__call ~= nil
end
local is_transform = M.is_transform

-- The base class: instances are called as t(observation, action), which
-- returns self:apply(observation, action).
local Transform = class.Object:extend("Transform")
M.Transform = Transform

function Transform.__call(self, observation, action)
  return self:apply(observation, action)
end

-- Returns the transformed observation. Subclasses must implement it.
function Transform:apply(observation, action) -- luacheck: ignore 212
  error(format("%s.apply is not implemented: subclasses of Transform must "
    .. "define apply(observation, action)", self.__name), 0)
end

-- Compose{t1, t2, ...} or Compose(t1, t2, ...): applies the transforms in
-- order, each receiving the previous one's result and the same action.
local Compose = Transform:extend("Compose")
M.Compose = Compose

function Compose:init(...)
  local list
  local n = select("#", ...)
  if n == 1 and type((...)) == "table" and not is_transform((...)) then
    list = (...)
    n = #list
  else
    list = { ... }
  end
  local ts = {}
  for i = 1, n do
    if not is_transform(list[i]) then
      error(format("Compose: transform %d is not callable (got %s)", i,
        type(list[i])), 3)
    end
    ts[i] = list[i]
  end
  self.transforms = ts
end

function Compose:apply(observation, action)
  local ts = self.transforms
  for i = 1, #ts do
    local out = ts[i](observation, action)
    if out == nil then
      error(format("Compose: transform %d returned nil (a transform must "
        .. "return the observation)", i), 2)
    end
    observation = out
  end
  return observation
end

-- Null(): the identity transform.
local Null = Transform:extend("Null")
M.Null = Null

function Null:apply(observation) -- luacheck: ignore 212
  return observation
end

-- Reward(rubric): sets observation.reward = rubric(action, observation)
-- and returns the observation. `rubric` is a Rubric or any callable
-- (action, observation) -> number. The observation must be a table.
local Reward = Transform:extend("Reward")
M.Reward = Reward

function Reward:init(rubric)
  if not is_transform(rubric) then
    error("Reward: expected a rubric (callable as rubric(action, "
      .. "observation)), got " .. type(rubric), 3)
  end
  self.rubric = rubric
end

function Reward:apply(observation, action)
  if type(observation) ~= "table" then
    error("Reward: the observation must be a table, got "
      .. type(observation), 2)
  end
  observation.reward = self.rubric(action, observation)
  return observation
end

-- Applies transform `t` (anything callable, or nil for none) to
-- `observation`; returns the result. This is what the runner does.
function M.apply(t, observation, action)
  if t == nil then return observation end
  if not is_transform(t) then
    error("transforms.apply: transform is not callable (got " .. type(t)
      .. ")", 2)
  end
  local out = t(observation, action)
  if out == nil then
    error("transforms.apply: the transform returned nil (a transform must "
      .. "return the observation)", 2)
  end
  return out
end

return M
