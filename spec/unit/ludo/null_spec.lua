-- Specs for ludo.null: the unique, frozen JSON-null sentinel.
local null = require("ludo.null")

describe("ludo.null", function()
  it("is the same table for every require", function()
    assert.are.equal(null, require("ludo.null"))
    assert.are.equal("table", type(null))
  end)

  it("prints as ludo.null", function()
    assert.are.equal("ludo.null", tostring(null))
  end)

  it("is frozen", function()
    assert.has_error(function() null.x = 1 end, "ludo.null is read-only")
    assert.has_error(function() setmetatable(null, {}) end)
    assert.are.equal("ludo.null", getmetatable(null))
    assert.is_nil(next(null))
  end)
end)
