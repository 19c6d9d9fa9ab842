-- Specs for rubrics.trajectory (OpenEnv's TrajectoryRubric, with plain-data
-- steps and a streaming mode).
local TrajectoryRubric = require("rubrics.trajectory")
local null = require("ludo.null")

-- Scores the number of steps and remembers the trajectory it was given.
local Count = TrajectoryRubric:extend("Count")
function Count:score_trajectory(traj)
  self.seen = traj
  return #traj
end

describe("rubrics.trajectory", function()
  it("returns intermediate_reward until done, then the episode score",
    function()
      local r = Count()
      assert.are.equal(0.0, r("a1", { done = false }))
      assert.are.equal(0.0, r("a2", {}))
      assert.are.equal(3, r("a3", { done = true }))
      assert.are.equal(3, r.last_score)
    end)

  it("takes intermediate_reward as an option or positionally", function()
    assert.are.equal(0.1, Count { intermediate_reward = 0.1 }("a", {}))
    assert.are.equal(-1, Count(-1)("a", {}))
    assert.are.equal(0.1, Count { intermediate_reward = 0.1 }
      :state_dict().intermediate_reward)
  end)

  it("rejects bad options", function()
    assert.has_error(function() Count { intermediate = 1 } end,
      'Count: unknown option "intermediate"')
    assert.has_error(function() Count("x") end,
      "Count: intermediate_reward must be a number, got string")
  end)

  it("counts only a truthy, non-null done as done", function()
    local cases = {
      { { done = true }, true }, { { done = 1 }, true },
      { { done = "yes" }, true }, { { done = false }, false },
      { { done = 0 }, false }, { { done = null }, false },
      -- Python's truthiness, as OpenEnv's `if done:` reads it
      { { done = "" }, false }, { { done = {} }, false },
      { { done = { 1 } }, true }, { { done = { a = 1 } }, true },
      { { done = 0.0 }, false },
      { {}, false }, { "done", false }, { 42, false }, { nil, false },
    }
    for i, c in ipairs(cases) do
      assert.are.equal(c[2], TrajectoryRubric.is_done(c[1]),
        "case " .. i)
      local r = Count()
      local v = r("a", c[1])
      assert.are.equal(c[2] and 1 or 0.0, v, "case " .. i)
    end
  end)

  it("does not clear the trajectory on done; reset does", function()
    local r = Count()
    r("a", { done = true })
    assert.are.equal(2, r("b", { done = true }))
    assert.are.equal(2, #r:trajectory())
    r:reset()
    assert.are.equal(0, #r:trajectory())
    assert.are.equal(0, r:steps())
    assert.are.equal(1, r("c", { done = true }))
  end)

  it("stores steps as {action, observation}", function()
    local r = Count()
    r({ move = "e4" }, { board = "x", done = false })
    local t = r:trajectory()
    assert.are.same({ action = { move = "e4" },
      observation = { board = "x", done = false } }, t[1])
  end)

  it("returns a copy of the trajectory", function()
    local r = Count()
    r("a", {})
    local t = r:trajectory()
    t[1] = nil
    t[2] = "junk"
    assert.are.equal(1, #r:trajectory())
    assert.are.equal("a", r:trajectory()[1].action)
  end)

  it("deep-copies steps into plain data", function()
    local r = Count()
    local action = { nested = { n = 1 } }
    local obs = setmetatable({ f = print, co = coroutine.create(print),
      null = null }, { __index = { hidden = 1 } })
    obs.self = obs
    local shared = { 1 }
    obs.a, obs.b = shared, shared
    r(action, obs)
    action.nested.n = 2
    local step = r:trajectory()[1]
    assert.are.equal(1, step.action.nested.n)
    local o = step.observation
    assert.are.equal(tostring(print), o.f)
    assert.are.equal("string", type(o.co))
    assert.are.equal(null, o.null)
    assert.are.equal("<cycle>", o.self)
    assert.is_nil(getmetatable(o))
    assert.is_nil(o.hidden)
    assert.are.equal(o.a, o.b)
    assert.are_not.equal(shared, o.a)
  end)

  it("passes the stored trajectory to score_trajectory", function()
    local r = Count()
    r("a", {})
    r("b", { done = true })
    assert.are.equal(2, #r.seen)
    assert.are.equal("b", r.seen[2].action)
  end)

  it("names score_trajectory or finish when they return a bad score",
    function()
      local Bad = TrajectoryRubric:extend("Bad")
      function Bad:score_trajectory() return "win" end
      local ok, err = pcall(Bad(), "a", { done = true })
      assert.is_false(ok)
      assert.matches('score_trajectory %(defined at [^)]*%) returned a '
        .. 'string %("win"%)', err)
      assert.is_nil(err:find("forward", 1, true))
      local Fold = TrajectoryRubric:extend("Fold")
      Fold.streaming = true
      function Fold:start() return 0 end
      function Fold:fold(acc) return acc + 1 end
      function Fold:finish() return {} end
      ok, err = pcall(Fold(), "a", { done = true })
      assert.is_false(ok)
      assert.matches("finish %(defined at [^)]*%) returned a table", err)
    end)

  it("raises for the abstract methods", function()
    local Bare = TrajectoryRubric:extend("Bare")
    assert.has_error(function() Bare()("a", { done = true }) end,
      "the root rubric (Bare): Bare.score_trajectory is not implemented: "
        .. "subclasses of TrajectoryRubric must define "
        .. "score_trajectory(trajectory)")
    assert.has_error(function() Bare():compute_step_rewards() end,
      "Bare.compute_step_rewards is not implemented: subclasses of "
        .. "TrajectoryRubric must define compute_step_rewards()")
  end)

  it("saves and loads intermediate_reward", function()
    local r = Count { intermediate_reward = 0.5 }
    assert.are.same({ intermediate_reward = 0.5 }, r:state_dict())
    r:load_state_dict({ intermediate_reward = 0.25 })
    assert.are.equal(0.25, r("a", {}))
    assert.has_error(function()
      r:load_state_dict({ intermediate_reward = "x" })
    end)
  end)

  describe("streaming mode", function()
    local Sum = TrajectoryRubric:extend("Sum")
    function Sum:start()
      self.starts = (self.starts or 0) + 1
      return 0
    end
    function Sum:fold(acc, action) return acc + action end
    function Sum:finish(acc, steps) return acc / steps end

    it("folds steps and scores on done", function()
      local r = Sum { streaming = true }
      assert.is_true(r.streaming)
      assert.are.equal(0.0, r(1, {}))
      assert.are.equal(0.0, r(2, {}))
      assert.are.equal(2, r(3, { done = true }))
      assert.are.equal(3, r:steps())
      assert.are.equal(2, r:final_score())
    end)

    it("keeps folding after done and restarts after reset", function()
      local r = Sum { streaming = true }
      r(4, { done = true })
      assert.are.equal(3, r(2, { done = true }))
      r:reset()
      assert.are.equal(5, r(5, { done = true }))
      assert.are.equal(2, r.starts)
    end)

    it("keeps no trajectory", function()
      local r = Sum { streaming = true }
      r(1, {})
      assert.has_error(function() r:trajectory() end,
        "Sum: a streaming trajectory rubric keeps no trajectory (use "
          .. "steps(), or streaming = false)")
    end)

    it("raises when fold or finish is missing", function()
      local Half = TrajectoryRubric:extend("Half")
      assert.has_error(function()
        Half { streaming = true }("a", {})
      end, "the root rubric (Half): Half.fold is not implemented: "
        .. "subclasses of TrajectoryRubric must define "
        .. "fold(acc, action, observation) in streaming mode")
    end)
  end)
end)
