-- Specs for rubrics.exponential_discounting (OpenEnv's
-- ExponentialDiscountingTrajectoryRubric).
local ED = require("rubrics.exponential_discounting")

-- Scores an episode by its last observation's `result`.
local Game = ED:extend("Game")
function Game:score_trajectory(traj)
  local r = traj[#traj].observation.result
  if r == "win" then return 1.0 elseif r == "draw" then return 0.5 end
  return 0.0
end

local function play(r, n, result)
  for i = 1, n - 1 do r({ move = i }, { done = false }) end
  return r({ move = n }, { done = true, result = result })
end

describe("rubrics.exponential_discounting", function()
  it("defaults to gamma 0.99 and intermediate_reward 0.0", function()
    local g = Game()
    assert.are.equal(0.99, g.gamma)
    assert.are.same({ gamma = 0.99, intermediate_reward = 0.0 },
      g:state_dict())
  end)

  it("takes options or positional gamma, intermediate_reward", function()
    local g = Game(0.5, 0.1)
    assert.are.equal(0.5, g.gamma)
    assert.are.equal(0.1, g.intermediate_reward)
    g = Game { gamma = 0.9 }
    assert.are.equal(0.9, g.gamma)
    assert.are.equal(0.0, g.intermediate_reward)
  end)

  it("rejects gamma outside [0, 1] with OpenEnv's message", function()
    assert.has_error(function() Game { gamma = 1.5 } end,
      "gamma must be in [0, 1], got 1.5")
    assert.has_error(function() Game { gamma = -0.1 } end,
      "gamma must be in [0, 1], got -0.1")
    assert.has_error(function() Game(2) end,
      "gamma must be in [0, 1], got 2")
    assert.has_error(function() Game(0 / 0) end,
      "gamma must be in [0, 1], got nan")
    assert.has_error(function() Game("x") end,
      "gamma must be a number, got string")
    assert.has_no_error(function() Game(0) end)
    assert.has_no_error(function() Game(1) end)
  end)

  it("returns no rewards before any step", function()
    assert.are.same({}, Game():compute_step_rewards())
  end)

  it("gives all credit to the last step with gamma 0", function()
    local g = Game(0.0)
    assert.are.equal(1.0, play(g, 4, "win"))
    assert.are.same({ 0.0, 0.0, 0.0, 1.0 }, g:compute_step_rewards())
  end)

  it("gives equal credit with gamma 1", function()
    local g = Game(1.0)
    play(g, 3, "draw")
    assert.are.same({ 0.5, 0.5, 0.5 }, g:compute_step_rewards())
  end)

  it("halves the credit per step back with gamma 0.5", function()
    local g = Game(0.5)
    play(g, 4, "win")
    assert.are.same({ 0.125, 0.25, 0.5, 1.0 }, g:compute_step_rewards())
  end)

  it("discounts a 100-step episode as R * gamma^(T-1-t)", function()
    local g = Game(0.99)
    assert.are.equal(1.0, play(g, 100, "win"))
    local rewards = g:compute_step_rewards()
    assert.are.equal(100, #rewards)
    for t = 0, 99 do
      assert.are.equal(1.0 * 0.99 ^ (99 - t), rewards[t + 1])
    end
    assert.are.equal(1.0, rewards[100])
    assert.is_near(0.3697, rewards[1], 1e-4)
  end)

  it("gives zero rewards for a loss", function()
    local g = Game(0.9)
    play(g, 3, "loss")
    assert.are.same({ 0.0, 0.0, 0.0 }, g:compute_step_rewards())
  end)

  it("saves and loads gamma with the constructor's check", function()
    local g = Game(0.9)
    g:load_state_dict({ gamma = 0.5, intermediate_reward = 0.2 })
    assert.are.same({ gamma = 0.5, intermediate_reward = 0.2 },
      g:state_dict())
    assert.has_error(function() g:load_state_dict({ gamma = 3 }) end,
      "gamma must be in [0, 1], got 3")
    assert.are.equal(0.5, g.gamma)
  end)

  it("works in streaming mode with the same rewards", function()
    local SGame = ED:extend("SGame")
    function SGame:fold(_, _, obs) return obs.result end
    function SGame:finish(result)
      return result == "win" and 1.0 or 0.0
    end
    local s, g = SGame { gamma = 0.9, streaming = true }, Game(0.9)
    play(s, 10, "win")
    play(g, 10, "win")
    assert.are.same(g:compute_step_rewards(), s:compute_step_rewards())
  end)
end)
