-- rubrics.exponential_discounting: ExponentialDiscountingTrajectoryRubric,
-- credit assignment by exponential discounting of the final score.
--
--   local ED = require("rubrics.exponential_discounting")
--   local Chess = ED:extend("Chess")
--   function Chess:score_trajectory(traj)
--     local last = traj[#traj].observation
--     return last.result == "win" and 1.0 or 0.0
--   end
--   local r = Chess{gamma = 0.9}
--   ...; r:compute_step_rewards()  --> {R*0.9^(T-1), ..., R*0.9, R}
--
-- OpenEnv semantics: gamma outside [0, 1] raises "gamma must be in
-- [0, 1], got g"; compute_step_rewards() is {} before any step, else
-- r_t = R * gamma^(T-1-t) for t = 0..T-1 (array index t+1), where R is the
-- final score (score_trajectory of the trajectory). gamma = 1 gives every
-- step R, gamma = 0 gives {0, ..., 0, R}. Subclasses still implement
-- score_trajectory, or, with streaming = true, start/fold/finish (see
-- rubrics.trajectory): the rewards only need T and R, so the streaming
-- form computes them in O(1) memory.
local TrajectoryRubric = require("rubrics.trajectory")
local jsontext = require("ludo.jsontext")

local type, error, format = type, error, string.format

local ED = TrajectoryRubric:extend("ExponentialDiscountingTrajectoryRubric")

local function check_gamma(g, level)
  if type(g) ~= "number" then
    error("gamma must be a number, got " .. type(g), level + 1)
  end
  if not (g >= 0 and g <= 1) then
    error(format("gamma must be in [0, 1], got %s", jsontext.number(g)),
      level + 1)
  end
  return g
end

-- ED{gamma = 0.99, intermediate_reward = 0.0, streaming = false} or
-- ED(gamma, intermediate_reward).
function ED:init(...)
  local o = TrajectoryRubric.read_options(self.__name, 3, table.pack(...),
    { "gamma", "intermediate_reward" })
  local g = o.gamma
  if g == nil then g = 0.99 end
  self.gamma = check_gamma(g, 4)
  self:_traj_setup(o, 4)
end

-- Returns the discounted per-step rewards (see the header).
function ED:compute_step_rewards()
  local T = self._tr_steps
  local out = {}
  if T == 0 then return out end
  local R, gamma = self:final_score(), self.gamma
  for t = 0, T - 1 do
    out[t + 1] = R * gamma ^ (T - 1 - t)
  end
  return out
end

-- Adds `gamma` to the trajectory state.
function ED:state_dict()
  local s = ED.super.state_dict(self)
  s.gamma = self.gamma
  return s
end

function ED:load_state_dict(state)
  if type(state) == "table" and state.gamma ~= nil then
    check_gamma(state.gamma, 2)
  end
  ED.super.load_state_dict(self, state)
  if state.gamma ~= nil then self.gamma = state.gamma end
end

return ED
