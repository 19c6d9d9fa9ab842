-- rubrics.streaming_discounting: StreamingExponentialDiscountingRubric,
-- exponential discounting in O(1) memory.
--
--   local SED = require("rubrics.streaming_discounting")
--   local Chess = SED:extend("Chess")
--   function Chess:fold(acc, action, obs) return obs.result end
--   function Chess:finish(result) return result == "win" and 1.0 or 0.0 end
--   local r = Chess{gamma = 0.9}
--
-- ExponentialDiscountingTrajectoryRubric with streaming = true: the final
-- score comes from start/fold/finish (see rubrics.trajectory) and
-- compute_step_rewards needs only the step count and that score, so no
-- trajectory is kept.
local ED = require("rubrics.exponential_discounting")

local SED = ED:extend("StreamingExponentialDiscountingRubric")

SED.streaming = true

return SED
