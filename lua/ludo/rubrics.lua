-- ludo.rubrics: the rubric library in one table.
--
--   local R = require("ludo.rubrics")
--   local reward = R.Sequential(R.Gate(Compiles()),
--     R.WeightedSum({Tests(), Style()}, {0.7, 0.3}))
--
-- Fields: Rubric (the base class), Sequential, Gate, WeightedSum,
-- RubricList, RubricDict, TrajectoryRubric,
-- ExponentialDiscountingTrajectoryRubric, StreamingTrajectoryRubric,
-- StreamingExponentialDiscountingRubric, LLMJudge; and is_rubric(v).
-- Each class lives in its own module (ludo.rubric, rubrics.<name>); this
-- module only gathers them.
-- The classes are required on first use, so a session state holds only
-- the ones its environment uses.
local Rubric = require("ludo.rubric")

local modules = {
  Sequential = "rubrics.sequential",
  Gate = "rubrics.gate",
  WeightedSum = "rubrics.weighted_sum",
  RubricList = "rubrics.rubric_list",
  RubricDict = "rubrics.rubric_dict",
  TrajectoryRubric = "rubrics.trajectory",
  ExponentialDiscountingTrajectoryRubric = "rubrics.exponential_discounting",
  StreamingTrajectoryRubric = "rubrics.streaming_trajectory",
  StreamingExponentialDiscountingRubric = "rubrics.streaming_discounting",
  LLMJudge = "rubrics.llm_judge",
}

return setmetatable({
  Rubric = Rubric,
  is_rubric = Rubric.is_rubric,
}, {
  __index = function(t, k)
    local name = modules[k]
    if name == nil then return nil end
    local v = require(name)
    rawset(t, k, v)
    return v
  end,
  -- pairs() sees every class, loading them all.
  __pairs = function(t)
    for k in pairs(modules) do local _ = t[k] end
    return next, t, nil
  end,
})
