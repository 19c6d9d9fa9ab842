-- Bench: exponential discounting over episodes of T = 100 steps.
local R = require("ludo.rubrics")
local Win = R.ExponentialDiscountingTrajectoryRubric:extend("Win")
function Win:score_trajectory(traj)
  return traj[#traj].observation.x > 0.5 and 1.0 or 0.0
end
local t = 0
return {
  name = "disc100",
  action = { x = "number" },
  rubric = Win{ gamma = 0.99 },
  reset = function() t = 0 return {} end,
  step = function(action)
    t = t + 1
    return { x = action.x, done = t >= 100 }
  end,
}
