-- rubrics.streaming_trajectory: StreamingTrajectoryRubric, a trajectory
-- rubric in O(1) memory.
--
--   local STR = require("rubrics.streaming_trajectory")
--   local Moves = STR:extend("Moves")
--   function Moves:start() return 0 end
--   function Moves:fold(n, action, obs) return n + 1 end
--   function Moves:finish(n, steps) return n <= 40 and 1.0 or 0.5 end
--
-- TrajectoryRubric with streaming = true (see rubrics.trajectory): each
-- step is folded into an accumulator and no step is kept, so memory does
-- not grow with the episode. Subclasses implement start/fold/finish and,
-- if they need it, compute_step_rewards (using self:steps() and
-- self:final_score()).
local TrajectoryRubric = require("rubrics.trajectory")

local StreamingTrajectoryRubric =
  TrajectoryRubric:extend("StreamingTrajectoryRubric")

StreamingTrajectoryRubric.streaming = true

return StreamingTrajectoryRubric
