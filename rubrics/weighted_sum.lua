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

local COLD = "rubrics.weighted_sum_cold"

local WeightedSum = Rubric:extend("WeightedSum")
Rubric.lazy(WeightedSum, COLD,
  " len get weights state_dict load_state_dict forward_gather _ws_bad_init ")

-- WeightedSum(rubrics, weights): both arrays of equal length.
function WeightedSum:init(rubrics, weights)
  return transient("rubrics.weighted_sum_build").init(self, rubrics, weights)
end

WeightedSum.__call = Rubric.children_first_call

function WeightedSum:forward(action, observation)
  local list, w = self._rb_list, self._ws_weights
  if is_async(self) and can_wait() then
    return self:forward_gather(action, observation)
  end
  local total = 0.0
  for i = 1, #list do
    total = total + list[i](action, observation) * w[i]
  end
  return total
end

WeightedSum.__len = function(self) return #self._rb_list end

-- A raw copy: reset runs every episode, and a lookup that misses in the
-- class goes through the lazy __index function (see Rubric.lazy).
WeightedSum.reset = Rubric.reset

return WeightedSum
