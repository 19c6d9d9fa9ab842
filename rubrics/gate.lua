-- rubrics.gate: Gate, a threshold on one rubric.
--
--   local Gate = require("rubrics.gate")
--   Gate(PassesTests(), 0.5)   -- 0.0 below 0.5, else the child's score
--
-- OpenEnv semantics: the child is named `rubric` (gate.rubric); the result
-- is 0.0 when score < threshold, else the score itself (the threshold is
-- inclusive). The default threshold 1.0 lets only a perfect score through.
-- The child is evaluated before the Gate's pre-hooks. A child that gives
-- no score (nil) makes the call raise: there is nothing to compare.
--
-- The child may be named: Gate({correct = Correct()}, 0.5) names it
-- `correct` (gate.correct in named_rubrics and in metadata.rubrics); it is
-- then g.correct, and g.rubric is nil. The Gate scores its first child.
local Rubric = require("ludo.rubric")

local type, error, format = type, error, string.format
local transient = require("ludo.class").transient

local Gate = Rubric:extend("Gate")

-- Gate(rubric, threshold = 1.0), or Gate({name = rubric}, threshold).
function Gate:init(rubric, threshold)
  if Rubric.is_rubric(rubric) then
    self.rubric = rubric
  else
    transient("ludo.rubric_build").gate(self, rubric, 3) -- or raises
  end
  if threshold == nil then threshold = 1.0 end
  if type(threshold) ~= "number" then
    error("Gate: threshold must be a number, got " .. type(threshold), 3)
  end
  self.threshold = threshold
end

Gate.__call = Rubric.children_first_call

function Gate:forward(action, observation)
  local score = self._rb_list[1](action, observation)
  if score == nil then
    transient("ludo.rubric_error").no_score(self, 1)
  end
  if score < self.threshold then return 0.0 end
  return score
end

-- Adds `threshold` to the base state.
function Gate:state_dict()
  local s = Gate.super.state_dict(self)
  s.threshold = self.threshold
  return s
end

function Gate:load_state_dict(state)
  Gate.super.load_state_dict(self, state)
  local t = state.threshold
  if t ~= nil then
    if type(t) ~= "number" then
      error(format("Gate: load_state_dict: threshold must be a number, "
        .. "got %s", type(t)), 2)
    end
    self.threshold = t
  end
end

return Gate
