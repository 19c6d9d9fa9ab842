-- Specs for rubrics.rubric_list (OpenEnv's RubricList).
local RubricList = require("rubrics.rubric_list")
local util = require("testutil")
local Const = util.Const

describe("rubrics.rubric_list", function()
  it("starts empty or from an array", function()
    assert.are.equal(0, #RubricList())
    local a, b = Const(1), Const(2)
    local l = RubricList({ a, b })
    assert.are.equal(2, l:len())
    assert.are.equal(a, l:get(1))
    assert.are.equal(b, l[2])
  end)

  it("appends and extends, naming children rubric_<index>", function()
    local l = RubricList()
    local a, b, c = Const(1), Const(2), Const(3)
    assert.are.equal(l, l:append(a))
    l:extend({ b, c })
    local names = util.collect(l:named_rubrics())
    assert.are.same({ "rubric_0", "rubric_1", "rubric_2" }, names)
    assert.are.equal(c, l.rubric_2)
    assert.are.equal(3, #l)
  end)

  it("iterates with ipairs and iter", function()
    local l = RubricList({ Const(1), Const(2) })
    local vals = {}
    for i, r in ipairs(l) do vals[i] = r.value end
    assert.are.same({ 1, 2 }, vals)
    vals = {}
    for i, r in l:iter() do vals[i] = r.value end
    assert.are.same({ 1, 2 }, vals)
  end)

  it("does not aggregate: calling it raises", function()
    local l = RubricList({ Const(1) })
    local ok, err = pcall(l, "a", "o")
    assert.is_false(ok)
    assert.matches("RubricList.forward%(%) is not implemented%.", err)
  end)

  it("rejects non-rubrics", function()
    assert.has_error(function() RubricList():append(3) end,
      "RubricList.append: expected a Rubric, got number")
    assert.has_error(function() RubricList({ Const(1), "x" }) end)
    assert.has_error(function() RubricList():extend(Const(1)) end)
    assert.has_error(function() RubricList({ a = Const(1) }) end,
      'RubricList: expected an array of rubrics, got a table with the key '
        .. '"a" (for rubrics by name use RubricDict)')
    assert.has_error(function() RubricList():extend({ Const(1), b = 1 }) end,
      'RubricList.extend: expected an array of rubrics, got a table with '
        .. 'the key "b" (for rubrics by name use RubricDict)')
  end)

  it("resets and saves its items with the tree", function()
    local l = RubricList({ Const(1) })
    l[1]()
    l:reset()
    assert.is_nil(l[1].last_score)
    assert.are.same({ children = { rubric_0 = { value = 1 } } },
      l:state_dict())
  end)
end)
