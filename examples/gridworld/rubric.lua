-- The gridworld's reward, as a rubric tree (see docs on ludo.rubrics):
--
--   Sequential{
--     {"legal", Gate{moved = Moved()}},   -- bumping into a wall scores 0
--     {"progress", WeightedSum({closer = Closer(), reached = Reached()},
--                              {closer = 0.4, reached = 0.6})}}
--
-- so a step earns 0.4 when it brings the agent one move closer to the goal
-- (shortest-path distance, computed by the game in C), 1.0 when it reaches
-- the goal, and 0 otherwise. An optimal episode of d moves totals
-- 0.4 * d + 0.6. The step result reports every score in
-- metadata.rubrics under "total", "legal", "legal.moved", "progress",
-- "progress.closer" and "progress.reached".
local R = require("ludo.rubrics")

local M = {}

-- 1.0 when the move was not blocked.
local Moved = R.Rubric:extend("Moved")
function Moved:forward(_, obs)
  return obs.moved and 1.0 or 0.0
end
M.Moved = Moved

-- 1.0 when the shortest-path distance shrank. It remembers the distance
-- of the previous step (episode state, cleared by reset); before the first
-- step it compares with obs.start_distance.
local Closer = R.Rubric:extend("Closer")
function Closer:forward(_, obs)
  local before = self.previous or obs.start_distance
  self.previous = obs.distance
  return obs.distance < before and 1.0 or 0.0
end
function Closer:reset()
  Closer.super.reset(self)
  self.previous = nil
end
M.Closer = Closer

-- 1.0 at the goal.
local Reached = R.Rubric:extend("Reached")
function Reached:forward(_, obs)
  return obs.distance == 0 and 1.0 or 0.0
end
M.Reached = Reached

-- A fresh tree (each session state builds its own).
function M.new()
  return R.Sequential {
    { "legal", R.Gate { moved = Moved() } },
    { "progress", R.WeightedSum({ closer = Closer(), reached = Reached() },
      { closer = 0.4, reached = 0.6 }) },
  }
end

return M
