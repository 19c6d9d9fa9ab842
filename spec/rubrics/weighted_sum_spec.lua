-- Specs for rubrics.weighted_sum (OpenEnv's WeightedSum semantics, plus
-- concurrency of waiting children through ludo.async).
local WeightedSum = require("rubrics.weighted_sum")
local Sequential = require("rubrics.sequential")
local LLMJudge = require("rubrics.llm_judge")
local async = require("ludo.async")
local util = require("testutil")
local Const = util.Const

local function judge(text, delay)
  return LLMJudge { prompt_template = "{action}",
    client = util.client(text, delay) }
end

describe("rubrics.weighted_sum", function()
  it("computes sum(score * weight) as a float", function()
    local ws = WeightedSum({ Const(1), Const(0.5), Const(0) },
      { 0.2, 0.3, 0.5 })
    assert.are.equal(0.2 + 0.15, ws())
    local v = WeightedSum({ Const(1) }, { 1 })()
    assert.are.equal(1.0, v)
    assert.are.equal("float", math.type(v))
  end)

  it("raises on a count mismatch with OpenEnv's message", function()
    assert.has_error(function()
      WeightedSum({ Const(1), Const(1) }, { 1.0 })
    end, "Number of rubrics (2) must match number of weights (1)")
    assert.has_error(function() WeightedSum({}, { 0.5, 0.5 }) end,
      "Number of rubrics (0) must match number of weights (2)")
  end)

  it("raises when weights do not sum to 1.0, showing the sum", function()
    assert.has_error(function()
      WeightedSum({ Const(1), Const(1) }, { 0.5, 0.4 })
    end, "Weights must sum to 1.0, got 0.9")
    assert.has_error(function()
      WeightedSum({ Const(1), Const(1) }, { 0.6, 0.5 })
    end, "Weights must sum to 1.0, got 1.1")
    assert.has_error(function()
      WeightedSum({ Const(1), Const(1) }, { 1, 1 })
    end, "Weights must sum to 1.0, got 2")
    assert.has_error(function()
      WeightedSum({ Const(1) }, { 0 / 0 })
    end, "Weights must sum to 1.0, got nan")
  end)

  it("accepts sums within 1e-6 and negative weights", function()
    local ws = WeightedSum({ Const(1), Const(1), Const(1) },
      { 0.1, 0.2, 0.7 + 5e-7 })
    assert.is_near(1.0, ws(), 1e-6)
    assert.are.equal(1.5 * 2 - 0.5 * 4,
      WeightedSum({ Const(2), Const(4) }, { 1.5, -0.5 })())
  end)

  it("rejects non-rubrics and non-numeric weights", function()
    assert.has_error(function() WeightedSum({ Const(1), 5 }, { 0.5, 0.5 })
    end, "WeightedSum: argument 2 is not a Rubric (got number)")
    assert.has_error(function() WeightedSum({ Const(1) }, { "1" }) end,
      "WeightedSum: weight 1 must be a number, got string")
    assert.has_error(function() WeightedSum(Const(1), { 1 }) end)
  end)

  it("returns a copy of the weights", function()
    local ws = WeightedSum({ Const(1), Const(0) }, { 0.25, 0.75 })
    local w = ws:weights()
    assert.are.same({ 0.25, 0.75 }, w)
    w[1] = 100
    assert.are.same({ 0.25, 0.75 }, ws:weights())
    assert.are.equal(0.25, ws())
  end)

  it("names children rubric_0.. and indexes them 1-based", function()
    local a, b = Const(1), Const(0)
    local ws = WeightedSum({ a, b }, { 0.5, 0.5 })
    assert.are.equal(a, ws.rubric_0)
    assert.are.equal(b, ws[2])
    assert.are.equal(b, ws:get(2))
    assert.are.equal(2, #ws)
  end)

  it("evaluates children before its own pre-hooks", function()
    local log = {}
    local ws = WeightedSum({ util.Traced("a", log, 1),
      util.Traced("b", log, 1) }, { 0.5, 0.5 })
    util.trace_hooks(ws, "ws", log)
    ws()
    assert.are.same({ "a.forward", "b.forward", "ws.pre", "ws.post" }, log)
  end)

  it("does not create coroutines when the tree is synchronous", function()
    -- The leaf records the coroutine it runs in: the concurrent path would
    -- run it in a gather child, the plain loop in the caller's coroutine.
    local running = {}
    local ws = WeightedSum({ util.Fn(function()
      running[#running + 1] = coroutine.running()
      return 1
    end) }, { 1 })
    assert.is_false(ws:is_async())
    local outer = async.run(function()
      ws()
      return coroutine.running()
    end)
    assert.are.equal(outer, running[1])
  end)

  it("runs async children in gather coroutines under a driver", function()
    local running = {}
    local Probe = util.Fn:extend("Probe")
    Probe.async = true
    local ws = WeightedSum({ Probe(function()
      running[#running + 1] = coroutine.running()
      return 1
    end) }, { 1 })
    local outer = async.run(function()
      ws()
      return coroutine.running()
    end)
    assert.are_not.equal(outer, running[1])
  end)

  it("runs waiting children concurrently (3 s, not 4 s)", function()
    local ws = WeightedSum({ judge("1.0", 1), judge("0.5", 3) },
      { 0.5, 0.5 })
    assert.is_true(ws:is_async())
    local now, v = util.run_timed(function() return ws("a", "o") end)
    assert.are.equal(3, now)
    assert.are.equal(0.75, v)
    assert.are.equal("number", type(v))
  end)

  it("while Sequential of the same judges waits in turn (4 s)", function()
    local s = Sequential(judge("1.0", 1), judge("0.5", 3))
    local now, v = util.run_timed(function() return s("a", "o") end)
    assert.are.equal(4, now)
    assert.are.equal(0.5, v)
  end)

  it("mixes waiting and synchronous children", function()
    local ws = WeightedSum({ Const(1), judge("0", 2), Const(0.5) },
      { 0.25, 0.25, 0.5 })
    local now, v = util.run_timed(function() return ws() end)
    assert.are.equal(2, now)
    assert.are.equal(0.5, v)
    assert.are.equal(0.0, ws[2].last_score)
  end)

  it("runs async-marked children in a plain loop outside a driver",
    function()
      local ws = WeightedSum({ judge("1"), judge("0") }, { 0.5, 0.5 })
      assert.are.equal(0.5, ws())
    end)

  it("loads weights with the constructor's checks", function()
    local ws = WeightedSum({ Const(1), Const(0) }, { 0.5, 0.5 })
    ws:load_state_dict({ weights = { 0.9, 0.1 } })
    assert.are.equal(0.9, ws())
    assert.has_error(function()
      ws:load_state_dict({ weights = { 0.9, 0.2 } })
    end)
    assert.has_error(function()
      ws:load_state_dict({ weights = { 1.0 } })
    end, "Number of rubrics (2) must match number of weights (1)")
    assert.are.same({ 0.9, 0.1 }, ws:weights())
  end)
end)
