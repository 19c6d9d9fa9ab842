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
-- the ones its environment uses; pairs() loads them all.
local Rubric = require("ludo.rubric")

local transient = require("ludo.class").transient

-- " Class module" for each class, in one long (uninterned) string.
local MODULES = " Sequential rubrics.sequential Gate rubrics.gate \z
  WeightedSum rubrics.weighted_sum RubricList rubrics.rubric_list \z
  RubricDict rubrics.rubric_dict TrajectoryRubric rubrics.trajectory \z
  ExponentialDiscountingTrajectoryRubric rubrics.exponential_discounting \z
  StreamingTrajectoryRubric rubrics.streaming_trajectory \z
  StreamingExponentialDiscountingRubric rubrics.streaming_discounting \z
  LLMJudge rubrics.llm_judge "

local meta = {}

-- R.Name requires the class's module. pairs(R) loads every class first:
-- __pairs is this function, which sees k == nil then.
function meta.__index(t, k)
  if k == nil then return transient("ludo.rubric_build").pairs(t, MODULES) end
  -- " k " in MODULES, searched in place (a lookup makes no string). (A
  -- module name has a dot; a class name has none.)
  local i = type(k) == "string" and not k:find(".", 1, true) and 1
  while i do
    local s, e = MODULES:find(k, i, true)
    if s and MODULES:byte(s - 1) == 32 and MODULES:byte(e + 1) == 32 then
      local v = require(MODULES:sub(e + 2, MODULES:find(" ", e + 2, true) - 1))
      rawset(t, k, v)
      return v
    end
    i = s and s + 1
  end
end
meta.__pairs = meta.__index

return setmetatable({ Rubric = Rubric, is_rubric = Rubric.is_rubric }, meta)
