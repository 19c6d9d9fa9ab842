-- The quiz's rubrics (the tutorial, docs/tutorial.md): is the answer a
-- whole number, and is it the sum asked for? A module of its own so that
-- the environment and the unit tests share it.
local R = require("ludo.rubrics")

local M = {}

-- 1.0 when the answer is a whole number written in digits ("7", "-2").
M.Format = R.Rubric:extend("Format")
function M.Format:forward(action)
  return action.answer:match("^%s*%-?%d+%s*$") and 1.0 or 0.0
end

-- 1.0 when the answer is a + b, the sum the observation asked for.
M.Correct = R.Rubric:extend("Correct")
function M.Correct:forward(action, observation)
  return tonumber(action.answer) == observation.a + observation.b
    and 1.0 or 0.0
end

-- The reward: 0.2 for the format, 0.8 for the right sum. The keys name
-- the parts: metadata.rubrics reports "correct" and "format".
function M.new()
  return R.WeightedSum({ format = M.Format(), correct = M.Correct() },
    { format = 0.2, correct = 0.8 })
end

return M
