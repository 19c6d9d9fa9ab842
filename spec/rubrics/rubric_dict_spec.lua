-- Specs for rubrics.rubric_dict (OpenEnv's RubricDict, without its key
-- shadowing defect).
local RubricDict = require("rubrics.rubric_dict")
local util = require("testutil")
local Const = util.Const

describe("rubrics.rubric_dict", function()
  it("keeps insertion order from pairs and set", function()
    local a, b, c = Const(1), Const(2), Const(3)
    local d = RubricDict({ { "zeta", a }, { "alpha", b } })
    d:set("mid", c)
    assert.are.same({ "zeta", "alpha", "mid" }, d:keys())
    assert.are.same({ a, b, c }, d:values())
    assert.are.same({ { "zeta", a }, { "alpha", b }, { "mid", c } },
      d:items())
  end)

  it("adds a map in sorted key order", function()
    local d = RubricDict({ b = Const(1), a = Const(2), c = Const(3) })
    assert.are.same({ "a", "b", "c" }, d:keys())
    assert.are.same({ "a", "b", "c" }, util.collect(d:named_rubrics()))
  end)

  it("refuses a table mixing pairs and keys", function()
    assert.has_error(function()
      RubricDict({ { "a", Const(1) }, b = Const(2) })
    end, 'RubricDict: the table mixes {key, rubric} pairs and keys ("b"); '
      .. "give one form")
  end)

  it("gets, checks and counts entries", function()
    local a = Const(1)
    local d = RubricDict({ { "code", a } })
    assert.are.equal(a, d:get("code"))
    assert.is_nil(d:get("nope"))
    assert.is_true(d:has("code"))
    assert.is_false(d:has("nope"))
    assert.are.equal(1, d:len())
    assert.are.equal(1, #d)
  end)

  it("replaces an existing key in place", function()
    local d = RubricDict({ { "a", Const(1) }, { "b", Const(2) } })
    local new = Const(9)
    d:set("a", new)
    assert.are.same({ "a", "b" }, d:keys())
    assert.are.equal(new, d:get("a"))
  end)

  it("never lets keys shadow methods", function()
    local d = RubricDict()
    for _, k in ipairs({ "keys", "get", "set", "values", "items", "len",
      "has", "update", "forward", "reset" }) do
      d:set(k, Const(1))
    end
    assert.are.equal(10, #d:keys())
    assert.are.equal("keys", d:keys()[1])
    assert.are.equal(1, d:get("get").value)
    assert.is_true(d:has("has"))
    assert.are.equal("function", type(d.keys))
    d:reset()
  end)

  it("names children by key in traversal and paths", function()
    local inner = Const(1)
    local d = RubricDict({ { "code", inner } })
    assert.are.equal(inner, d:get_rubric("code"))
    assert.are.equal("code", (d:named_rubrics()()))
  end)

  it("updates from pairs or a map", function()
    local d = RubricDict()
    d:update({ { "x", Const(1) } }):update({ y = Const(2) })
    assert.are.same({ "x", "y" }, d:keys())
  end)

  it("iterates in order with iter and pairs", function()
    local d = RubricDict({ { "b", Const(1) }, { "a", Const(2) } })
    local ks = {}
    for k in d:iter() do ks[#ks + 1] = k end
    assert.are.same({ "b", "a" }, ks)
    ks = {}
    for k, r in pairs(d) do ks[#ks + 1] = k .. r.value end
    assert.are.same({ "b1", "a2" }, ks)
  end)

  it("does not aggregate: calling it raises", function()
    local ok, err = pcall(RubricDict({ { "a", Const(1) } }), 1, 2)
    assert.is_false(ok)
    assert.matches("RubricDict.forward%(%) is not implemented%.", err)
  end)

  it("rejects bad keys and values", function()
    local d = RubricDict()
    assert.has_error(function() d:set(1, Const(1)) end,
      "RubricDict.set: key must be a string, got number")
    assert.has_error(function() d:set("a", 5) end,
      'RubricDict.set: value for "a" must be a Rubric, got number')
    assert.has_error(function() d:set("a.b", Const(1)) end)
    assert.has_error(function() RubricDict({ [true] = Const(1) }) end)
  end)
end)
