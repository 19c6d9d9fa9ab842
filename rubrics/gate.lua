-- rubrics.gate: Gate, a threshold on one rubric.
--
--   local Gate = require("rubrics.gate")
--   Gate(PassesTests(), 0.5)   -- 0.0 below 0.5, else the child's score
--
-- OpenEnv semantics: the child is named `rubric` (gate.rubric); the result
-- is 0.0 when score < threshold, else the score itself (the threshold is
-- inclusive). The default threshold 1.0 lets only a perfect score through.
-- The child is evaluated before the Gate's pre-hooks.
local Rubric = require("ludo.rubric")

local type, error, format = type, error, string.format

local Gate = Rubric:extend("Gate")

-- Gate(rubric, threshold = 1.0).
function Gate:init(rubric, threshold)
  if not Rubric.is_rubric(rubric) then
    error("Gate: first argument must be a Rubric, got " .. type(rubric), 3)
  end
  if threshold == nil then threshold = 1.0 end
  if type(threshold) ~= "number" then
    error("Gate: threshold must be a number, got " .. type(threshold), 3)
  end
  self.rubric = rubric
  self.threshold = threshold
end

Gate.__call = Rubric.children_first_call

function Gate:forward(action, observation)
  local score = self.rubric(action, observation)
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
