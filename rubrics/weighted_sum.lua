-- rubrics.weighted_sum: WeightedSum, a weighted combination of rubrics.
--
--   local WeightedSum = require("rubrics.weighted_sum")
--   WeightedSum({PassesTests(), Style()}, {0.7, 0.3})
--
-- OpenEnv semantics: the counts must match ("Number of rubrics (N) must
-- match number of weights (M)"), the weights must sum to 1.0 within 1e-6
-- ("Weights must sum to 1.0, got X"); negative weights are allowed. The
-- result is sum(score_i * weight_i), a float. Children given by position
-- are named rubric_0.. (0-based, as in OpenEnv; ws:get(i) is 1-based) and
-- are evaluated before the WeightedSum's pre-hooks, like Sequential and
-- Gate. A child that gives no score (nil) makes the call raise.
--
-- Named children, two forms (the names show in named_rubrics and in
-- metadata.rubrics; ws.format is the child):
--   WeightedSum({format = Format(), correct = Correct()},
--               {format = 0.2, correct = 0.8})
-- a map of rubrics and a map of weights with the same names; the children
-- are in sorted name order (correct, format: a Lua table has no order of
-- its own), and each weight goes with the rubric of its name;
--   WeightedSum{{"format", Format(), 0.2}, {"correct", Correct(), 0.8}}
-- {name, rubric, weight} records, kept in the order written.
-- weights() and state_dict's `weights` are arrays in child order.
--
-- When a child may wait (ws:is_async()) and the call runs under a driver
-- (async.can_wait()), the children run concurrently with async.gather, as
-- asyncio.gather does: two judges waiting 1 s and 3 s take 3 s, not 4 s.
-- A synchronous tree takes a plain loop: no coroutine or closure per call.
--
-- Methods: len() (also #ws), get(i) (also ws[i]), weights() (a copy),
-- state_dict() (adds `weights`), load_state_dict(state) (weights validated
-- like the constructor's). They and the concurrent path live in
-- rubrics.weighted_sum_cold, the constructor's work in
-- rubrics.weighted_sum_build (loaded when needed, see Rubric.lazy and
-- ludo.class's transient), so an idle session state that only scores does
-- not hold them.
local Rubric = require("ludo.rubric")

local transient = require("ludo.class").transient
local is_async, can_wait = Rubric.is_async, coroutine.isyieldable
local gen = Rubric._rb_gen -- see Rubric:is_async

local COLD = "rubrics.weighted_sum_cold"

local WeightedSum = Rubric:extend("WeightedSum")
Rubric.lazy(WeightedSum, COLD,
  " len get weights state_dict load_state_dict forward_gather _ws_bad_init ")

-- WeightedSum(rubrics, weights): both arrays of equal length, both maps
-- with the same names, or one array of {name, rubric, weight} records.
function WeightedSum:init(rubrics, weights)
  return transient("rubrics.weighted_sum_build").init(self, rubrics, weights)
end

WeightedSum.__call = Rubric.children_first_call

function WeightedSum:forward(action, observation)
  local list, w = self._rb_list, self._ws_weights
  -- (_rb_async == gen[1] * 2: is_async's cached "no", read inline)
  if self._rb_async ~= gen[1] * 2 and is_async(self) and can_wait() then
    return self:forward_gather(action, observation)
  end
  local total = 0.0
  for i = 1, #list do
    local score = list[i](action, observation)
    if score == nil then transient("ludo.rubric_error").no_score(self, i) end
    total = total + score * w[i]
  end
  return total
end

WeightedSum.__len = function(self) return #self._rb_list end

-- A raw copy: reset runs every episode, and a lookup that misses in the
-- class goes through the lazy __index function (see Rubric.lazy).
WeightedSum.reset = Rubric.reset

return WeightedSum
