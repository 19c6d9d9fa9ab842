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
local Rubric = require("ludo.rubric")

return {
  Rubric = Rubric,
  is_rubric = Rubric.is_rubric,
  Sequential = require("rubrics.sequential"),
  Gate = require("rubrics.gate"),
  WeightedSum = require("rubrics.weighted_sum"),
  RubricList = require("rubrics.rubric_list"),
  RubricDict = require("rubrics.rubric_dict"),
  TrajectoryRubric = require("rubrics.trajectory"),
  ExponentialDiscountingTrajectoryRubric =
    require("rubrics.exponential_discounting"),
  StreamingTrajectoryRubric = require("rubrics.streaming_trajectory"),
  StreamingExponentialDiscountingRubric =
    require("rubrics.streaming_discounting"),
  LLMJudge = require("rubrics.llm_judge"),
}
