-- Specs for ludo.policy's random policy: values drawn from the action
-- schema, and a clear error for a range that holds no value.
local P = require("ludo.policy")

describe("ludo.policy.random_value", function()
  it("draws an integer inside [minimum, maximum]", function()
    for _ = 1, 50 do
      local v = P.random_value({ type = "integer", minimum = 2, maximum = 4 })
      assert.is_true(math.type(v) == "integer" and v >= 2 and v <= 4)
    end
  end)

  it("names the schema when an integer range holds no integer", function()
    assert.has_error(function()
      P.random_value({ type = "integer", minimum = 5, maximum = 1 })
    end, "the random policy: the action schema's integer range [5, 1] "
      .. "holds no integer")
  end)

  it("names the schema when a number range is empty", function()
    assert.has_error(function()
      P.random_value({ type = "number", minimum = 1.5, maximum = 1 })
    end, "the random policy: the action schema's number range [1.5, 1] "
      .. "is empty")
  end)
end)
