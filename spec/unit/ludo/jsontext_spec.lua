-- Specs for ludo.jsontext: deterministic JSON text from Lua values.
local json = require("ludo.jsontext")
local null = require("ludo.null")

describe("ludo.jsontext", function()
  describe("encode", function()
    local valid = {
      { "nil", nil, "null" },
      { "ludo.null", null, "null" },
      { "true", true, "true" },
      { "false", false, "false" },
      { "integer", 1, "1" },
      { "negative integer", -42, "-42" },
      { "max integer", math.maxinteger, "9223372036854775807" },
      { "integral float", 1.0, "1.0" },
      { "float", 0.1, "0.1" },
      { "float sum", 0.1 + 0.2, "0.30000000000000004" },
      { "third", 1 / 3, "0.3333333333333333" },
      { "large float", 1e20, "1e+20" },
      { "small float", 1.5e-300, "1.5e-300" },
      { "2^53 float", 2.0 ^ 53, "9007199254740992.0" },
      { "negative zero", -0.0, "-0.0" },
      { "NaN", 0 / 0, "null" },
      { "inf", math.huge, "null" },
      { "-inf", -math.huge, "null" },
      { "string", "hi", '"hi"' },
      { "escapes", 'a"b\\c\n\r\t\b\f', '"a\\"b\\\\c\\n\\r\\t\\b\\f"' },
      { "control bytes", "\0\1\31", '"\\u0000\\u0001\\u001f"' },
      { "DEL and UTF-8 pass", "\127é", '"\127é"' },
      { "slash is not escaped", "a/b", '"a/b"' },
      { "array", { 1, "two", 3.5 }, '[1,"two",3.5]' },
      { "null inside array", { 1, null, 3 }, "[1,null,3]" },
      { "empty table", {}, "{}" },
      { "marked empty array", json.array(), "[]" },
      { "marked object", json.object({ 1, 2 }), '{"1":1,"2":2}' },
      { "sorted keys", { b = 1, a = 2, c = { z = 1, y = 2 } },
        '{"a":2,"b":1,"c":{"y":2,"z":1}}' },
      { "holes make an object", { [1] = "a", [3] = "c" },
        '{"1":"a","3":"c"}' },
      { "mixed keys", { 1, x = 2 }, '{"1":1,"x":2}' },
      { "float key", { [1.5] = true }, '{"1.5":true}' },
      { "shared (non-cyclic) table", (function()
          local s = { 1 }
          return { a = s, b = s }
        end)(), '{"a":[1],"b":[1]}' },
    }
    for _, case in ipairs(valid) do
      it("encodes " .. case[1], function()
        assert.are.equal(case[3], json.encode(case[2]))
      end)
    end

    local invalid = {
      { "a function", { a = { b = { print } } },
        "jsontext.encode: cannot encode a function at $.a.b[1]" },
      { "a coroutine", { co = coroutine.create(print) },
        "jsontext.encode: cannot encode a thread at $.co" },
      { "a cycle", (function()
          local t = { x = {} }
          t.x.back = t
          return t
        end)(), "jsontext.encode: cycle at $.x.back" },
      { "an odd key in the path", { ["a b"] = { f = print } },
        'jsontext.encode: cannot encode a function at $["a b"].f' },
      { "a boolean key", { [true] = 1 },
        "jsontext.encode: cannot encode a boolean key at $" },
      { "clashing key texts", { [1] = "a", ["1"] = "b" },
        'jsontext.encode: two keys both written "1" at $' },
      { "a marked array with holes", json.array({ [2] = 1 }),
        "jsontext.encode: table marked as array has non-sequence keys at $" },
    }
    for _, case in ipairs(invalid) do
      it("raises on " .. case[1], function()
        assert.has_error(function() json.encode(case[2]) end, case[3])
      end)
    end

    it("is deterministic for the same content built differently", function()
      local a, b = {}, {}
      for i = 1, 50 do a["k" .. i] = i end
      for i = 50, 1, -1 do b["k" .. i] = i end
      assert.are.equal(json.encode(a), json.encode(b))
    end)

    it("limits nesting depth", function()
      local t = {}
      local cur = t
      for _ = 1, json.MAX_DEPTH + 5 do
        cur[1] = {}
        cur = cur[1]
      end
      assert.has_error(function() json.encode(t) end)
    end)
  end)

  describe("arrays decoded by ludo.json", function()
    -- ludo.json is a C module: loaded from build/cmod when it is built.
    local ok, cjson = pcall(require, "ludo.json")

    it("stay arrays when empty, at any depth", function()
      if not ok then
        pending("ludo.json is not built")
        return
      end
      for _, text in ipairs({ "[]", '{"a":[]}', '{"a":[[],{}],"b":[1,[]]}',
        '[[[]]]' }) do
        assert.are.equal(text, json.encode(cjson.decode(text)))
      end
    end)

    it("are recognised by the metatable's __name alone", function()
      local mt = { __name = "ludo.json.array" }
      assert.are.equal('{"a":[]}', json.encode({ a = setmetatable({}, mt) }))
      assert.are.equal("[1,2]", json.encode(setmetatable({ 1, 2 }, mt)))
      -- Another __name changes nothing.
      assert.are.equal("{}", json.encode(setmetatable({}, { __name = "x" })))
    end)

    it("refuse string keys like other marked arrays", function()
      local mt = { __name = "ludo.json.array" }
      assert.has_error(function()
        json.encode(setmetatable({ x = 1 }, mt))
      end, "jsontext.encode: table marked as array has non-sequence keys "
        .. "at $")
    end)
  end)

  describe("try_encode", function()
    it("returns text, or nil and an EJSON message", function()
      assert.are.equal("[1]", json.try_encode({ 1 }))
      local v, err, code = json.try_encode({ f = print })
      assert.is_nil(v)
      assert.are.equal(
        "EJSON: jsontext.encode: cannot encode a function at $.f", err)
      assert.are.equal("EJSON", code)
    end)
  end)

  describe("number", function()
    it("formats like Python's repr for common values", function()
      assert.are.equal("0.9", json.number(0.5 + 0.4))
      assert.are.equal("1.1", json.number(0.6 + 0.5))
      assert.are.equal("2", json.number(2))
      assert.are.equal("2.0", json.number(2.0))
      assert.are.equal("nan", json.number(0 / 0))
      assert.are.equal("-inf", json.number(-math.huge))
    end)

    it("round-trips every float it prints", function()
      local x = 0.0
      for i = 1, 2000 do
        x = x + i * 1.37e-3 / 7
        assert.are.equal(x, tonumber(json.number(x)))
      end
    end)
  end)
end)
