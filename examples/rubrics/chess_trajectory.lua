-- examples/rubrics/chess_trajectory.lua: win/loss credit assignment over a
-- chess game with exponential discounting.
--
-- The agent plays White. Each step's observation says whether the game is
-- over and, at the end, the result. The rubric returns 0.0 during the game
-- and the final score (win 1.0, draw 0.5, loss 0.0) on the last move;
-- compute_step_rewards() then spreads it back with gamma^(T-1-t). The same
-- rubric is shown in the streaming form, which keeps O(1) memory.
--
-- Run from the repository root:
--   LUA_PATH='lua/?.lua;lua/?/init.lua;./?.lua;;' \
--     lua5.4 examples/rubrics/chess_trajectory.lua
local R = require("ludo.rubrics")

local RESULT_SCORE = { win = 1.0, draw = 0.5, loss = 0.0 }

-- Keeps the trajectory and reads the result from the last observation.
local ChessOutcome =
  R.ExponentialDiscountingTrajectoryRubric:extend("ChessOutcome")
function ChessOutcome:score_trajectory(traj)
  return RESULT_SCORE[traj[#traj].observation.result] or 0.0
end

-- The same score, streaming: the accumulator is just the last result.
local StreamingChessOutcome =
  R.StreamingExponentialDiscountingRubric:extend("StreamingChessOutcome")
function StreamingChessOutcome:fold(_, _, observation)
  return observation.result
end
function StreamingChessOutcome:finish(result)
  return RESULT_SCORE[result] or 0.0
end

-- White's moves; the observation after each (the opponent's reply folded
-- in). Scholar's mate: White wins on move 4.
local WIN = {
  { "e4", "e5" }, { "Bc4", "Nc6" }, { "Qh5", "Nf6" }, { "Qxf7#", nil },
}
-- Fool's mate: White is mated after 2 moves.
local LOSS = { { "f3", "e5" }, { "g4", "Qh4#" } }

local function play(rubric, game, result)
  for i, move in ipairs(game) do
    local last = i == #game
    local obs = { reply = move[2], done = last,
      result = last and result or nil }
    local r = rubric({ move = move[1] }, obs)
    print(("chess %-8s %-22s move %d %-6s reward=%.2f"):format(result,
      rubric.__name, i, move[1], r))
  end
  local rewards = rubric:compute_step_rewards()
  local parts = {}
  for i, v in ipairs(rewards) do parts[i] = ("%.4f"):format(v) end
  print(("chess %-8s %-22s step_rewards={%s}"):format(result, rubric.__name,
    table.concat(parts, ", ")))
  rubric:reset()
end

for _, rubric in ipairs({ ChessOutcome { gamma = 0.9 },
  StreamingChessOutcome { gamma = 0.9 } }) do
  play(rubric, WIN, "win")
  play(rubric, LOSS, "loss")
end
