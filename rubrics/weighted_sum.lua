-- rubrics.weighted_sum: WeightedSum, a weighted combination of rubrics.
--
--   local WeightedSum = require("rubrics.weighted_sum")
--   WeightedSum({PassesTests(), Style()}, {0.7, 0.3})
--
-- OpenEnv semantics: the counts must match ("Number of rubrics (N) must
-- match number of weights (M)"), the weights must sum to 1.0 within 1e-6
-- ("Weights must sum to 1.0, got X"); negative weights are allowed. The
-- result is sum(score_i * weight_i), a float. Children are named
-- rubric_0.. (0-based, as in OpenEnv; ws:get(i) is 1-based) and are
-- evaluated before the WeightedSum's pre-hooks, like Sequential and Gate.
--
-- When a child may wait (ws:is_async()) and the call runs under a driver
-- (async.can_wait()), the children run concurrently with async.gather, as
-- asyncio.gather does: two judges waiting 1 s and 3 s take 3 s, not 4 s.
-- A synchronous tree takes a plain loop: no coroutine or closure per call.
local Rubric = require("ludo.rubric")

local type, error, format, abs = type, error, string.format, math.abs
local can_wait = coroutine.isyieldable
-- ludo.async and ludo.jsontext are required only when needed (a waiting
-- child, a weight error), so a synchronous tree does not pay their memory
-- in every session state.

local WeightedSum = Rubric:extend("WeightedSum")

local function check_weights(n, weights, level)
  -- Validates weights for n rubrics; returns a private copy.
  if type(weights) ~= "table" then
    error("WeightedSum: weights must be an array of numbers, got "
      .. type(weights), level + 1)
  end
  local m = #weights
  if n ~= m then
    error(format("Number of rubrics (%d) must match number of weights (%d)",
      n, m), level + 1)
  end
  local copy, total = {}, 0
  for i = 1, m do
    local w = weights[i]
    if type(w) ~= "number" then
      error(format("WeightedSum: weight %d must be a number, got %s", i,
        type(w)), level + 1)
    end
    copy[i] = w
    total = total + w
  end
  -- Written so that a NaN sum fails too.
  if not (abs(total - 1.0) <= 1e-6) then -- luacheck: ignore 581
    error("Weights must sum to 1.0, got "
      .. require("ludo.jsontext").number(total),
      level + 1)
  end
  return copy
end

-- WeightedSum(rubrics, weights): both arrays of equal length.
function WeightedSum:init(rubrics, weights)
  if type(rubrics) ~= "table" or Rubric.is_rubric(rubrics) then
    error("WeightedSum: first argument must be an array of rubrics", 3)
  end
  local list, n = Rubric.rubric_args("WeightedSum", 4, rubrics)
  local w = check_weights(n, weights, 3)
  for i = 1, n do
    self:add_child("rubric_" .. (i - 1), list[i])
  end
  self._ws_weights = w
end

WeightedSum.__call = Rubric.children_first_call

local function forward_gather(self, action, observation)
  -- Runs the children concurrently (some may wait).
  local list, w = self._rb_list, self._ws_weights
  local fns = {}
  for i = 1, #list do
    local child = list[i]
    fns[i] = function() return child(action, observation) end
  end
  local results = require("ludo.async").gather(fns)
  local total = 0.0
  for i = 1, #list do total = total + results[i][1] * w[i] end
  return total
end

function WeightedSum:forward(action, observation)
  if can_wait() and self:is_async() then
    return forward_gather(self, action, observation)
  end
  local list, w = self._rb_list, self._ws_weights
  local total = 0.0
  for i = 1, #list do
    total = total + list[i](action, observation) * w[i]
  end
  return total
end

-- Returns a copy of the weights (an array).
function WeightedSum:weights()
  local w, copy = self._ws_weights, {}
  for i = 1, #w do copy[i] = w[i] end
  return copy
end

-- Returns the number of children (also #ws).
function WeightedSum:len()
  return #self._rb_list
end

WeightedSum.__len = WeightedSum.len

-- Returns the i-th child (1-based), or nil (also ws[i]).
function WeightedSum:get(i)
  return self._rb_list[i]
end

-- Adds `weights` to the base state.
function WeightedSum:state_dict()
  local s = WeightedSum.super.state_dict(self)
  s.weights = self:weights()
  return s
end

-- Loads weights (validated like the constructor's) and children's state.
function WeightedSum:load_state_dict(state)
  local w
  if type(state) == "table" and state.weights ~= nil then
    w = check_weights(#self._rb_list, state.weights, 2)
  end
  WeightedSum.super.load_state_dict(self, state)
  if w ~= nil then self._ws_weights = w end
end

return WeightedSum
