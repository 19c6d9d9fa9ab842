-- Specs for rubrics.sequential (OpenEnv's Sequential semantics).
local Sequential = require("rubrics.sequential")
local util = require("testutil")
local Const, Traced = util.Const, util.Traced

describe("rubrics.sequential", function()
  it("scores 1.0 when empty", function()
    local s = Sequential()
    assert.are.equal(1.0, s(nil, nil))
    assert.are.equal("float", math.type(s(nil, nil)))
    assert.are.equal(0, #s)
  end)

  it("returns the last child's score", function()
    assert.are.equal(0.3, Sequential(Const(1), Const(0.5), Const(0.3))())
    assert.are.equal(0.7, Sequential(Const(0.7))())
  end)

  it("stops at a child scoring exactly 0 and returns 0.0", function()
    local log = {}
    local s = Sequential(Traced("a", log, 1), Traced("b", log, 0),
      Traced("c", log, 1))
    local v = s()
    assert.are.equal(0.0, v)
    assert.are.equal("float", math.type(v))
    assert.are.same({ "a.forward", "b.forward" }, log)
  end)

  it("stops on an integer 0 and on -0.0 too", function()
    assert.are.equal(0.0, Sequential(Const(0), Const(1))())
    assert.are.equal(0.0, Sequential(Const(-0.0), Const(1))())
  end)

  it("does not stop on negative scores", function()
    assert.are.equal(0.3, Sequential(Const(-1), Const(0.3))())
    assert.are.equal(-0.5, Sequential(Const(0.2), Const(-0.5))())
  end)

  it("does not stop on tiny non-zero scores", function()
    assert.are.equal(0.9, Sequential(Const(1e-300), Const(0.9))())
  end)

  it("names children rubric_0.. and indexes them 1-based", function()
    local a, b = Const(1), Const(2)
    local s = Sequential(a, b)
    local names = util.collect(s:named_children())
    assert.are.same({ "rubric_0", "rubric_1" }, names)
    assert.are.equal(a, s.rubric_0)
    assert.are.equal(a, s[1])
    assert.are.equal(b, s:get(2))
    assert.are.equal(2, #s)
    assert.are.equal(2, s:len())
    local seen = {}
    for i, r in ipairs(s) do seen[i] = r end
    assert.are.same({ a, b }, seen)
  end)

  it("accepts an array of rubrics", function()
    assert.are.equal(0.4, Sequential { Const(1), Const(0.4) }())
  end)

  it("rejects non-rubrics", function()
    assert.has_error(function() Sequential(Const(1), 2) end,
      "Sequential: argument 2 is not a Rubric (got number)")
    assert.has_error(function() Sequential(Const(1), nil, Const(1)) end,
      "Sequential: argument 2 is not a Rubric (got nil)")
  end)

  it("evaluates children before its own pre-hooks (OpenEnv order)",
    function()
      local log = {}
      local s = Sequential(Traced("c1", log, 1), Traced("c2", log, 0.5))
      util.trace_hooks(s, "seq", log)
      util.trace_hooks(s[1], "c1", log)
      s()
      assert.are.same({ "c1.pre", "c1.forward", "c1.post", "c2.forward",
        "seq.pre", "seq.post" }, log)
    end)

  describe("named children", function()
    local HERE = "sequential_spec.lua:%d+: "

    local function err_of(f)
      local ok, err = pcall(f)
      assert.is_false(ok, "no error")
      return err
    end

    it("takes {name, rubric} records and runs them in that order",
      function()
        local log = {}
        local s = Sequential { { "zeta", Traced("z", log, 1) },
          { "alpha", Traced("a", log, 0.5) } }
        assert.are.same({ "zeta", "alpha" },
          util.collect(s:named_children()))
        assert.are.equal(0.5, s())
        assert.are.same({ "z.forward", "a.forward" }, log)
        assert.are.equal(s[1], s.zeta)
        local v = Sequential({ "only", Const(0.25) }, { "two", Const(0.5) })
        assert.are.equal(0.5, v())
        assert.are.same({ "only", "two" }, util.collect(v:named_children()))
      end)

    it("refuses a map: it has no order", function()
      assert.matches(HERE .. "Sequential: a map of name = rubric has no "
        .. "order; Sequential runs its children in order: pass an array of "
        .. "{name, rubric} records instead$",
        err_of(function() Sequential { a = Const(1), b = Const(1) } end))
    end)

    it("refuses mixed and malformed tables", function()
      assert.matches(HERE .. "Sequential: the table of rubrics mixes "
        .. 'positions %(1, 2, ...%) and names %("b"%)',
        err_of(function() Sequential { Const(1), b = Const(1) } end))
      assert.matches(HERE .. 'Sequential: item 1 %("a"%) must have exactly '
        .. "the fields {name, rubric}$",
        err_of(function() Sequential { { "a", Const(1), 0.5 } } end))
      assert.matches(HERE .. "Sequential: argument 1 is not a Rubric %(got "
        .. 'string%); for one named child write Sequential{{"a", rubric}}$',
        err_of(function() Sequential({ "a", Const(1) }) end))
    end)
  end)

  it("stores last_score on itself and its children", function()
    local s = Sequential(Const(0.5), Const(0.25))
    s()
    assert.are.equal(0.25, s.last_score)
    assert.are.equal(0.5, s[1].last_score)
  end)
end)
