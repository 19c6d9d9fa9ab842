-- Specs for ludo.rubrics: the entry point gathers every rubric class.
local R = require("ludo.rubrics")
local Rubric = require("ludo.rubric")
local class = require("ludo.class")

describe("ludo.rubrics", function()
  local names = { "Sequential", "Gate", "WeightedSum", "RubricList",
    "RubricDict", "TrajectoryRubric", "ExponentialDiscountingTrajectoryRubric",
    "StreamingTrajectoryRubric", "StreamingExponentialDiscountingRubric",
    "LLMJudge" }

  it("exports the base class and every rubric class by name", function()
    assert.are.equal(Rubric, R.Rubric)
    assert.are.equal(Rubric.is_rubric, R.is_rubric)
    for _, name in ipairs(names) do
      local cls = R[name]
      assert.is_true(class.is_class(cls), name)
      assert.is_true(class.is_subclass(cls, Rubric), name)
      assert.are.equal(name, cls.__name)
    end
  end)

  it("exports the same classes as the per-file modules", function()
    assert.are.equal(require("rubrics.gate"), R.Gate)
    assert.are.equal(require("rubrics.llm_judge"), R.LLMJudge)
  end)
end)
