-- Specs for rubrics.streaming_discounting: exponential discounting in O(1)
-- memory.
local SED = require("rubrics.streaming_discounting")
local ED = require("rubrics.exponential_discounting")
local util = require("testutil")

local Win = SED:extend("Win")
function Win:fold(_, _, obs) return obs.result end
function Win:finish(result) return result == "win" and 1.0 or 0.0 end

local KeptWin = ED:extend("KeptWin")
function KeptWin:score_trajectory(t)
  return t[#t].observation.result == "win" and 1.0 or 0.0
end

describe("rubrics.streaming_discounting", function()
  it("checks gamma like the trajectory-keeping form", function()
    assert.has_error(function() Win { gamma = 2 } end,
      "gamma must be in [0, 1], got 2")
    assert.is_true(Win().streaming)
  end)

  it("matches the trajectory-keeping rewards for gamma 0, 0.5, 1",
    function()
      for _, gamma in ipairs({ 0.0, 0.5, 1.0, 0.99 }) do
        local s, k = Win(gamma), KeptWin(gamma)
        for i = 1, 7 do
          local obs = { done = i == 7, result = i == 7 and "win" or nil }
          assert.are.equal(k(i, obs), s(i, obs))
        end
        assert.are.same(k:compute_step_rewards(), s:compute_step_rewards())
      end
    end)

  it("returns no rewards before any step, and after reset", function()
    local s = Win(0.5)
    assert.are.same({}, s:compute_step_rewards())
    s(1, { done = true, result = "win" })
    assert.are.same({ 1.0 }, s:compute_step_rewards())
    s:reset()
    assert.are.same({}, s:compute_step_rewards())
  end)

  it("keeps memory flat over 10^5 steps", function()
    local s = Win(0.99)
    local obs = { done = false }
    for i = 1, 1000 do s(i, obs) end
    local before = util.heap_kb()
    for i = 1, 100000 do s(i, obs) end
    local growth = util.heap_kb() - before
    assert.is_true(growth < 64, "grew " .. growth .. " KiB")
    s(0, { done = true, result = "win" })
    local rewards = s:compute_step_rewards()
    assert.are.equal(101001, #rewards)
    assert.are.equal(1.0, rewards[101001])
  end)
end)
