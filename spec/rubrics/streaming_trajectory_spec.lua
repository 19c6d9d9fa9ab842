-- Specs for rubrics.streaming_trajectory: O(1) memory trajectory rubric.
local STR = require("rubrics.streaming_trajectory")
local TrajectoryRubric = require("rubrics.trajectory")
local util = require("testutil")

local Mean = STR:extend("Mean")
function Mean:start() return 0 end
function Mean:fold(acc, action) return acc + action.v end
function Mean:finish(acc, steps) return acc / steps end

-- The same score with the trajectory kept, to compare memory.
local KeptMean = TrajectoryRubric:extend("KeptMean")
function KeptMean:score_trajectory(t)
  local s = 0
  for i = 1, #t do s = s + t[i].action.v end
  return s / #t
end

local function grow(r, steps)
  -- Feeds `steps` steps; returns the heap growth in KiB.
  local obs = { done = false }
  local before = util.heap_kb()
  for i = 1, steps do r({ v = i % 3 }, obs) end
  return util.heap_kb() - before
end

describe("rubrics.streaming_trajectory", function()
  it("is a streaming TrajectoryRubric", function()
    assert.is_true(Mean().streaming)
    assert.are.equal(1.5, (function()
      local m = Mean()
      m({ v = 1 }, {})
      return m({ v = 2 }, { done = true })
    end)())
  end)

  it("can be switched back to keeping the trajectory", function()
    local m = Mean { streaming = false }
    assert.is_false(m.streaming)
  end)

  it("keeps memory flat over 10^5 steps", function()
    local m = Mean()
    grow(m, 1000) -- warm up
    local growth = grow(m, 100000)
    assert.are.equal(101000, m:steps())
    assert.is_true(growth < 64, "grew " .. growth .. " KiB")
    -- The accumulator still holds the whole episode's sum.
    assert.are.equal(101000, m:final_score() * m:steps())
  end)

  it("while the trajectory-keeping form grows with the episode",
    function()
      local k = KeptMean()
      local growth = grow(k, 100000)
      assert.is_true(growth > 1024, "grew only " .. growth .. " KiB")
    end)

  it("gives the same score as the trajectory-keeping form", function()
    local m, k = Mean(), KeptMean()
    for i = 1, 20 do
      local obs = { done = i == 20 }
      local a, b = m({ v = i }, obs), k({ v = i }, obs)
      assert.are.equal(b, a)
    end
  end)
end)
