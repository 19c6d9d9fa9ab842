-- Specs for rubrics.weighted_sum (OpenEnv's WeightedSum semantics, plus
-- concurrency of waiting children through ludo.async).
local WeightedSum = require("rubrics.weighted_sum")
local Sequential = require("rubrics.sequential")
local Gate = require("rubrics.gate")
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

  describe("named children", function()
    -- The position where an error must point: this file.
    local HERE = "weighted_sum_spec.lua:%d+: "

    local function err_of(f)
      local ok, err = pcall(f)
      assert.is_false(ok, "no error")
      return err
    end

    it("takes names from a map, in sorted order, weights by name",
      function()
        local fmt, correct = Const(1), Const(0)
        local ws = WeightedSum({ format = fmt, correct = correct },
          { format = 0.2, correct = 0.8 })
        assert.are.same({ "correct", "format" },
          util.collect(ws:named_children()))
        assert.are.equal(fmt, ws.format)
        assert.are.equal(correct, ws.correct)
        assert.are.equal(correct, ws[1])
        assert.are.same({ 0.8, 0.2 }, ws:weights())
        -- 1 * 0.2 (format) + 0 * 0.8 (correct): a weight with the wrong
        -- rubric would give 0.8.
        assert.are.equal(0.2, ws())
        assert.are.same({ correct = { value = 0 }, format = { value = 1 } },
          ws:state_dict().children)
      end)

    it("keeps {name, rubric, weight} records in the order written",
      function()
        local z, a = Const(1), Const(0)
        local ws = WeightedSum { { "zeta", z, 0.25 }, { "alpha", a, 0.75 } }
        assert.are.same({ "zeta", "alpha" },
          util.collect(ws:named_children()))
        assert.are.same({ 0.25, 0.75 }, ws:weights())
        assert.are.equal(0.25, ws())
        assert.are.equal(z, ws.zeta)
        assert.are.equal(z, ws:get(1))
      end)

    it("gives dotted paths to nested named children", function()
      local inner = Const(0.5)
      local ws = WeightedSum({ gate = Gate({ correct = inner }, 0.25),
        style = Const(1) }, { gate = 0.5, style = 0.5 })
      local names, objs = util.collect(ws:named_rubrics())
      assert.are.same({ "gate", "gate.correct", "style" }, names)
      assert.are.equal(inner, objs[2])
      assert.are.equal(inner, ws:get_rubric("gate.correct"))
      assert.are.equal(0.75, ws())
    end)

    it("runs named async children concurrently, by name", function()
      local ws = WeightedSum({ slow = judge("0.5", 3), fast = judge("1", 1) },
        { slow = 0.5, fast = 0.5 })
      local now, v = util.run_timed(function() return ws("a", "o") end)
      assert.are.equal(3, now)
      assert.are.equal(0.75, v)
      assert.are.equal(1.0, ws.fast.last_score)
    end)

    it("refuses weights that do not pair with the map", function()
      local function map() return { a = Const(1), b = Const(0) } end
      assert.matches(HERE .. 'WeightedSum: no weight for rubric "b"$',
        err_of(function() WeightedSum(map(), { a = 1 }) end))
      assert.matches(HERE .. 'WeightedSum: the weight "c" has no rubric$',
        err_of(function()
          WeightedSum(map(), { a = 0.5, b = 0.5, c = 0 })
        end))
      assert.matches(HERE .. "WeightedSum: the rubrics are a map of name = "
        .. "rubric, so the weights must be a map of name = weight, got an "
        .. "array$",
        err_of(function() WeightedSum(map(), { 0.5, 0.5 }) end))
      assert.matches(HERE .. "WeightedSum: the rubrics are a map .* got nil$",
        err_of(function() WeightedSum(map()) end))
      assert.matches(HERE .. 'WeightedSum: the weight of "a" must be a '
        .. "number, got string$",
        err_of(function() WeightedSum(map(), { a = "1", b = 0 }) end))
      assert.matches(HERE .. "Weights must sum to 1.0, got 0.9$",
        err_of(function() WeightedSum(map(), { a = 0.5, b = 0.4 }) end))
    end)

    it("refuses bad records", function()
      assert.matches(HERE .. "WeightedSum: the weights are in the {name, "
        .. "rubric, weight} records; the second argument must be nil, got "
        .. "table$", err_of(function()
          WeightedSum({ { "a", Const(1), 1 } }, { 1 })
        end))
      assert.matches(HERE .. 'WeightedSum: item 1 %("a"%) must have exactly '
        .. "the fields {name, rubric, weight}$",
        err_of(function() WeightedSum { { "a", Const(1) } } end))
      assert.matches(HERE .. 'WeightedSum: the weight of "a" must be a '
        .. "number, got string$",
        err_of(function() WeightedSum { { "a", Const(1), "1" } } end))
      assert.matches(HERE .. 'WeightedSum: item 2 %("b"%): field 2 must be '
        .. "a Rubric, got number$", err_of(function()
          WeightedSum { { "a", Const(1), 0.5 }, { "b", 3, 0.5 } }
        end))
      assert.matches(HERE .. "WeightedSum: item 2 must be a {name, rubric, "
        .. "weight} record like item 1, got a Rubric$", err_of(function()
          WeightedSum { { "a", Const(1), 0.5 }, Const(1) }
        end))
      assert.matches(HERE .. "WeightedSum: item 1: the name %(field 1 of "
        .. "{name, rubric, weight}%) must be a string, got number$",
        err_of(function() WeightedSum { { 1, Const(1), 1 } } end))
      assert.matches(HERE .. 'WeightedSum: the name "a" is given twice$',
        err_of(function()
          WeightedSum { { "a", Const(1), 0.5 }, { "a", Const(0), 0.5 } }
        end))
    end)

    it("refuses names that cannot be paths or hide methods", function()
      assert.matches(HERE .. 'WeightedSum: %w+: bad child rubric name "a.b"',
        err_of(function() WeightedSum({ ["a.b"] = Const(1) },
          { ["a.b"] = 1 }) end))
      assert.matches(HERE .. 'WeightedSum: %w+: a child rubric named "len" '
        .. "would hide the method len",
        err_of(function() WeightedSum({ len = Const(1) }, { len = 1 }) end))
      assert.matches(HERE .. "WeightedSum: the names of a map of rubrics "
        .. "must be strings, got boolean$", err_of(function()
          WeightedSum({ [true] = Const(1) }, { [true] = 1 })
        end))
    end)

    it("refuses a table that mixes positions and names", function()
      assert.matches(HERE .. "WeightedSum: the table of rubrics mixes "
        .. 'positions %(1, 2, ...%) and names %("b"%)', err_of(function()
          WeightedSum({ Const(1), b = Const(0) }, { 1 })
        end))
    end)
  end)
end)
