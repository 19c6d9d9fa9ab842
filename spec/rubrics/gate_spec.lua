-- Specs for rubrics.gate (OpenEnv's Gate semantics).
local Gate = require("rubrics.gate")
local util = require("testutil")
local Const = util.Const

describe("rubrics.gate", function()
  it("passes only a perfect score with the default threshold", function()
    assert.are.equal(1.0, Gate(Const(1.0))())
    assert.are.equal(0.0, Gate(Const(0.999))())
    assert.are.equal(1.0, Gate(Const(1.0)).threshold)
  end)

  it("is inclusive at the threshold", function()
    assert.are.equal(0.5, Gate(Const(0.5), 0.5)())
    assert.are.equal(0.0, Gate(Const(0.49), 0.5)())
    assert.are.equal(0.7, Gate(Const(0.7), 0.5)())
  end)

  it("returns the child's score, not 1.0, when passing", function()
    assert.are.equal(3, Gate(Const(3), 0.5)())
  end)

  it("handles negative thresholds and scores", function()
    assert.are.equal(-0.5, Gate(Const(-0.5), -1)())
    assert.are.equal(0.0, Gate(Const(-2), -1)())
  end)

  it("names its child rubric", function()
    local c = Const(1)
    local g = Gate(c, 0.2)
    assert.are.equal(c, g.rubric)
    assert.are.equal(c, g:get_rubric("rubric"))
    local names, children = util.collect(g:named_children())
    assert.are.same({ "rubric" }, names)
    assert.are.same({ c }, children)
  end)

  it("evaluates the child before its own pre-hooks", function()
    local log = {}
    local g = Gate(util.Traced("c", log, 1))
    util.trace_hooks(g, "gate", log)
    g()
    assert.are.same({ "c.forward", "gate.pre", "gate.post" }, log)
  end)

  it("names its child from {name = rubric}", function()
    local c = Const(0.5)
    local g = Gate({ correct = c }, 0.5)
    assert.are.same({ "correct" }, util.collect(g:named_children()))
    assert.are.equal(c, g.correct)
    assert.is_nil(g.rubric)
    assert.are.equal(c, g:get_rubric("correct"))
    assert.are.equal(0.5, g())
    assert.are.equal(0.0, Gate { correct = c }())
    assert.are.same({ threshold = 0.5, children = { correct = {
      value = 0.5 } } }, g:state_dict())
  end)

  it("refuses other tables as its child", function()
    local msg = "Gate: first argument must be a Rubric or {name = rubric}, "
      .. "got another table"
    assert.has_error(function() Gate({}) end, msg)
    assert.has_error(function() Gate({ a = Const(1), b = Const(1) }) end, msg)
    assert.has_error(function() Gate({ Const(1) }) end, msg)
    assert.has_error(function() Gate({ a = 1 }) end, msg)
  end)

  it("checks its arguments", function()
    assert.has_error(function() Gate(1) end,
      "Gate: first argument must be a Rubric or {name = rubric}, got number")
    assert.has_error(function() Gate(Const(1), "high") end,
      "Gate: threshold must be a number, got string")
  end)

  it("saves and loads its threshold", function()
    local g = Gate(Const(0.6), 0.5)
    assert.are.equal(0.5, g:state_dict().threshold)
    g:load_state_dict({ threshold = 0.7 })
    assert.are.equal(0.0, g())
    assert.has_error(function() g:load_state_dict({ threshold = "x" }) end)
  end)
end)
