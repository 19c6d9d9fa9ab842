-- ludo.json writes floats in their shortest round-trip form without printf
-- (runtime/script/json.c enc_short_decimal) and reads reals exactly
-- (runtime/base/jsonparse.c: a fast path for short ones, strtod for the
-- rest); these cases pin both against string.format's shortest "%.Ng" and
-- Lua's own tonumber over many values, with a fixed seed.
local json = require("ludo.json")

local function shortest(v)
  for p = 1, 17 do
    local c = string.format("%." .. p .. "g", v)
    if tonumber(c) == v then return c end
  end
  return string.format("%.17g", v)
end

local function digits(text)
  return #(text:gsub("^%-", ""):gsub("[eE].*$", ""):gsub("%.", "")
    :gsub("^0+", ""):gsub("0+$", ""))
end

describe("ludo.json float encoding", function()
  it("reads back every float exactly, as a float", function()
    math.randomseed(20261129)
    local cases = { 0.1 + 0.2, 1 / 3, 5e-324, 1e-300 / 7, 1e300 / 7,
      1 - 0.15, 0.9999999999999999, 1.0000000000000002, 2 ^ -30, -0.0 }
    for _ = 1, 20000 do
      cases[#cases + 1] = (math.random() - 0.5) * 10 ^ math.random(-12, 22)
    end
    for _, v in ipairs(cases) do
      local text = assert(json.encode(v))
      local back = json.decode(text)
      assert.are.equal("float", math.type(back), text)
      assert.is_true(back == v, text)
    end
  end)

  it("uses no more significant digits than the shortest %g form", function()
    math.randomseed(7)
    for _ = 1, 20000 do
      local v = (math.random() - 0.5) * 10 ^ math.random(-9, 14)
      if v ~= math.floor(v) then
        local text = json.encode(v)
        assert.is_true(digits(text) <= digits(shortest(v)),
          text .. " vs " .. shortest(v))
      end
    end
  end)

  it("writes short decimals as written", function()
    for text, v in pairs({ ["0.7"] = 0.7, ["0.52"] = 0.52, ["-0.25"] = -0.25,
      ["123.456"] = 123.456, ["0.000001"] = 1e-6, ["1.5"] = 1.5,
      ["0.30000000000000004"] = 0.1 + 0.2, ["3.0"] = 3.0 }) do
      assert.are.equal(text, json.encode(v))
    end
  end)

  it("reads every decimal text as the nearest double", function()
    math.randomseed(4711)
    for _ = 1, 20000 do
      local figures = {}
      for i = 1, math.random(1, 25) do
        figures[i] = tostring(math.random(i == 1 and 1 or 0, 9))
      end
      local m = table.concat(figures)
      local point = math.random(1, #m)
      local text = string.format("%s%s.%s0e%d",
        math.random(2) == 1 and "-" or "", m:sub(1, point), m:sub(point + 1),
        math.random(-330, 310))
      local v = json.decode(text)
      if v ~= nil then
        assert.are.equal("float", math.type(v))
        assert.is_true(v == tonumber(text), text)
      else
        -- Only numbers beyond the double range are refused.
        assert.are.equal(math.huge, math.abs(tonumber(text)), text)
      end
    end
  end)
end)
