-- rubrics.weighted_sum_cold: the rarely run part of WeightedSum (see
-- rubrics.weighted_sum): the methods len, get, weights, state_dict,
-- load_state_dict, forward_gather (the concurrent forward) and _ws_bad_init
-- (the constructor's errors), which rubrics.weighted_sum installs the
-- first time one is looked up. Loaded transiently (see ludo.class's
-- transient).
local Rubric = require("ludo.rubric")

local type, error, format, abs = type, error, string.format, math.abs

local T = {}

-- Validates weights for n rubrics, raising at `level` + 1; returns a
-- private copy. (Also used by load_state_dict.)
local function check_weights(n, weights, level)
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

-- Raises the error of a WeightedSum(rubrics, weights) that
-- rubrics.weighted_sum_build refused (WeightedSum.init tail-calls it, so
-- errors at level 3 + 1 reach the caller of WeightedSum(...)).
function T:_ws_bad_init(rubrics, weights)
  if type(rubrics) ~= "table" or Rubric.is_rubric(rubrics) then
    error("WeightedSum: first argument must be an array of rubrics", 4)
  end
  local n = #rubrics
  for i = 1, n do
    if not Rubric.is_rubric(rubrics[i]) then
      Rubric.rubric_args("WeightedSum", 5, rubrics) -- raises
    end
  end
  check_weights(n, weights, 4)
end

-- The forward of a tree with a child that may wait, under a driver: runs
-- the children concurrently.
function T:forward_gather(action, observation)
  local list, w = self._rb_list, self._ws_weights
  local fns = {}
  for i = 1, #list do
    local child = list[i]
    fns[i] = function() return child(action, observation) end
  end
  local results = require("ludo.async").gather(fns, Rubric.call_context)
  local total = 0.0
  for i = 1, #list do
    local score = results[i][1]
    if score == nil then
      require("ludo.class").transient("ludo.rubric_error").no_score(self, i)
    end
    total = total + score * w[i]
  end
  return total
end

-- Returns the number of children (also #ws).
function T:len()
  return #self._rb_list
end

-- Returns the i-th child (1-based), or nil (also ws[i]).
function T:get(i)
  return self._rb_list[i]
end

-- Returns a copy of the weights (an array).
function T:weights()
  local w, copy = self._ws_weights, {}
  for i = 1, #w do copy[i] = w[i] end
  return copy
end

-- Adds `weights` to the base state.
function T:state_dict()
  local s = Rubric.state_dict(self)
  s.weights = self:weights()
  return s
end

-- Loads weights (validated like the constructor's) and children's state.
function T:load_state_dict(state)
  local w
  if type(state) == "table" and state.weights ~= nil then
    w = check_weights(#self._rb_list, state.weights, 2)
  end
  Rubric.load_state_dict(self, state)
  if w ~= nil then self._ws_weights = w end
end

-- Loaded through class.transient (see ludo.class).
return T
