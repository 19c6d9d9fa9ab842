-- Bench: three leaf rubrics shared by the rubric bench environments.
local R = require("ludo.rubrics")
local M = {}
M.A = R.Rubric:extend("A")
function M.A:forward(action) return action.x > 0.5 and 1.0 or 0.0 end
M.B = R.Rubric:extend("B")
function M.B:forward(_, obs) return obs.x * 0.5 end
M.C = R.Rubric:extend("C")
function M.C:forward(action) return 1.0 - action.x end
return M
