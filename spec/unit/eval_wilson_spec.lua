-- Specs for the Wilson interval of `ludo eval`'s success rate
-- (ludo.eval.stats.wilson) at its ends: 0 successes give a lower bound of
-- exactly 0 and n of n an upper bound of exactly 1, for every n (the
-- float arithmetic gave 5.551115123e-17 at 0 of 3), and the report says
-- "0%", not "5.55e-15%".
local stats = require("ludo.eval.stats")
local report = require("ludo.eval.report")
local json = require("ludo.json")
local null = require("ludo.null")

local function rec(t)
  local r = {
    episode = 0, task = null, ["repeat"] = 0, seed = 1, steps = 3,
    reward = 0.0, rubrics = {}, done = true, truncated = false,
    success = false, invalid_actions = 0, error = null, wall_ms = 1.0,
    cpu_ms = 1.0, llm = null, trajectory = null,
  }
  for k, v in pairs(t) do r[k] = v end
  return r
end

describe("ludo.eval.stats.wilson at 0 and n successes", function()
  it("gives a lower bound of exactly 0 at 0 successes", function()
    assert.are.equal(0.0, stats.wilson(0, 3)[1])
    for n = 1, 2000 do
      local w = stats.wilson(0, n)
      assert.are.equal(0.0, w[1], "n = " .. n)
      assert.is_true(w[2] > 0 and w[2] <= 1, "n = " .. n)
    end
  end)

  it("gives an upper bound of exactly 1 at n successes of n", function()
    for n = 1, 2000 do
      local w = stats.wilson(n, n)
      assert.are.equal(1.0, w[2], "n = " .. n)
      assert.is_true(w[1] >= 0 and w[1] < 1, "n = " .. n)
    end
  end)

  it("still gives 0 of 3 the interval [0, 0.5614970318]", function()
    local w = stats.wilson(0, 3)
    assert.are.same({ 0.0, 0.5614970318 }, w)
    w = stats.wilson(3, 3)
    assert.are.same({ 0.4385029682, 1.0 }, w)
  end)
end)

describe("the summary and report of 0 successes of 3", function()
  local run = { pass_k = { 1 }, episodes_total = 3 }
  local rs = {
    rec({ episode = 0 }), rec({ episode = 1 }), rec({ episode = 2 }),
  }
  local timing = { wall_s = 1.0, started_at = "2026-12-01T10:00:00Z" }

  it("writes success.ci95 as [0, ...] in summary.json", function()
    local text = report.summary(run, rs, timing)
    local s = assert(json.decode(text))
    assert.are.equal(0, s.success.successes)
    assert.are.equal(0.0, s.success.ci95[1])
    assert.is_falsy(text:find("e-1", 1, true), text)
  end)

  it("shows the interval from 0%, not 5.55e-15%", function()
    local html = report.html(run, report.summary(run, rs, timing), rs)
    assert.is_truthy(html:find("CI 0\u{2013}56.1%", 1, true))
    assert.is_falsy(html:find("e-15", 1, true))
    assert.is_falsy(html:find("e-17", 1, true))
  end)
end)
