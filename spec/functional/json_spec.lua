-- Functional specs for the C JSON bridge (ludo.json, runtime/script/json.c
-- on the parser runtime/base/jsonparse.c), loaded into a stock lua5.4.
-- Table-driven: the valid and the invalid cases live side by side (STYLE
-- rule 22), with no I/O; only the memory-cap and boolean-schema cases open
-- sessions, through ludo.host (fixtures spec/fixtures/functional/json_*).
local json = require("ludo.json")
-- The sentinel is taken from ludo.json, not require("ludo.null"): busted
-- insulates each spec file by resetting package.loaded, while the C bridge
-- keeps the sentinel of the first load in the registry, so in a suite run
-- a fresh require("ludo.null") may be another table (see the child-process
-- check below).
local null = json.null

local decode, encode = json.decode, json.encode

-- Nests `n` arrays: "[[[...]]]" with `inner` in the middle.
local function nested_text(n, inner)
  return string.rep("[", n) .. (inner or "") .. string.rep("]", n)
end

-- Nests `n` Lua tables: {{{...}}}.
local function nested_table(n)
  local t = {}
  for _ = 2, n do t = { t } end
  return t
end

describe("ludo.json", function()
  it("exposes the null sentinel of ludo.null (in a fresh lua5.4)", function()
    local cmd = string.format("lua5.4 -e %q 2>&1",
      string.format("package.path = %q; package.cpath = %q; "
        .. "io.write(tostring(require('ludo.json').null == "
        .. "require('ludo.null')))", package.path, package.cpath))
    local p = assert(io.popen(cmd))
    local out = p:read("a")
    p:close()
    assert.are.equal("true", out)
  end)

  it("marks arrays with a metatable no script can reach or change",
    function()
      assert.is_nil(json.array_mt)
      assert.are.equal("ludo.json.array", getmetatable(json.array()))
      assert.are.equal("ludo.json.array", getmetatable(decode("[]")))
      assert.has_error(function() setmetatable(decode("[]"), nil) end)
      assert.is_true(json.is_array(decode("[]")))
    end)

  -- Each case: name, JSON text, the canonical text encode() writes back,
  -- and a check of the decoded Lua value.
  local round_trips = {
    { "null", "null", "null", function(v) assert.are.equal(null, v) end },
    { "true", "true", "true", function(v) assert.is_true(v) end },
    { "false", "false", "false", function(v) assert.is_false(v) end },
    { "empty array", "[]", "[]", function(v)
      assert.is_true(json.is_array(v))
      assert.are.equal(0, #v)
    end },
    { "empty object", "{}", "{}", function(v)
      assert.is_false(json.is_array(v))
      assert.is_nil(next(v))
    end },
    { "nested empties", '{"a":[],"b":{},"c":[[],{}]}',
      '{"a":[],"b":{},"c":[[],{}]}', function(v)
        assert.is_true(json.is_array(v.a))
        assert.is_false(json.is_array(v.b))
        assert.is_true(json.is_array(v.c[1]))
        assert.is_false(json.is_array(v.c[2]))
      end },
    { "integer", "42", "42", function(v)
      assert.are.equal("integer", math.type(v))
      assert.are.equal(42, v)
    end },
    { "negative integer", "-7", "-7", function(v)
      assert.are.equal("integer", math.type(v))
    end },
    { "integral float stays a float", "1.0", "1.0", function(v)
      assert.are.equal("float", math.type(v))
      assert.are.equal(1.0, v)
    end },
    { "float", "0.1", "0.1", function(v)
      assert.are.equal("float", math.type(v))
    end },
    { "2^53+1 as an integer is exact", "9007199254740993",
      "9007199254740993", function(v)
        assert.are.equal("integer", math.type(v))
        assert.are.equal((1 << 53) + 1, v)
      end },
    { "max integer", "9223372036854775807", "9223372036854775807",
      function(v) assert.are.equal(math.maxinteger, v) end },
    { "min integer", "-9223372036854775808", "-9223372036854775808",
      function(v) assert.are.equal(math.mininteger, v) end },
    { "negative zero float", "-0.0", "-0.0", function(v)
      assert.are.equal("float", math.type(v))
      assert.are.equal(-math.huge, 1 / v)
    end },
    { "integer minus zero is zero", "-0", "0", function(v)
      assert.are.equal("integer", math.type(v))
    end },
    { "large exponent", "1e308", "1e+308", function(v)
      assert.are.equal(1e308, v)
    end },
    { "small exponent", "1e-300", "1e-300", function(v)
      assert.are.equal(1e-300, v)
    end },
    { "exponent without dot is a float", "1E2", "100.0", function(v)
      assert.are.equal("float", math.type(v))
      assert.are.equal(100.0, v)
    end },
    { "smallest denormal", "5e-324", "5e-324", function(v)
      assert.are.equal(5e-324, v)
    end },
    { "underflow to zero", "1e-400", "0.0", function(v)
      assert.are.equal(0.0, v)
    end },
    { "ASCII string", '"hello"', '"hello"', function(v)
      assert.are.equal("hello", v)
    end },
    { "\\u escape to UTF-8", '"\\u00e9"', '"\u{e9}"', function(v)
      assert.are.equal("\xc3\xa9", v)
    end },
    { "surrogate pair", '"\\ud83d\\ude00"', '"\u{1F600}"', function(v)
      assert.are.equal("\xf0\x9f\x98\x80", v)
    end },
    { "raw UTF-8 passes", '"\u{4e2d}\u{6587}"', '"\u{4e2d}\u{6587}"',
      function(v) assert.are.equal(6, #v) end },
    { "NUL inside a string", '"a\\u0000b"', '"a\\u0000b"', function(v)
      assert.are.equal("a\0b", v)
    end },
    { "escapes", '"q\\"b\\\\s\\/n\\nt\\tc\\u0001"',
      '"q\\"b\\\\s/n\\nt\\tc\\u0001"', function(v)
        assert.are.equal('q"b\\s/n\nt\tc\1', v)
      end },
    { "nested arrays", "[1,[2,[3,[4]]]]", "[1,[2,[3,[4]]]]", function(v)
      assert.are.equal(4, v[2][2][2][1])
    end },
    { "null inside an array keeps its slot", "[1,null,3]", "[1,null,3]",
      function(v)
        assert.are.equal(3, #v)
        assert.are.equal(null, v[2])
      end },
    { "nested objects, keys written sorted",
      '{"z":{"y":1,"x":[true,false,null]},"a":0}',
      '{"a":0,"z":{"x":[true,false,null],"y":1}}', function(v)
        assert.are.equal(null, v.z.x[3])
      end },
    { "whitespace is ignored", ' \n\t{ "a" : [ 1 , 2 ] }\r\n',
      '{"a":[1,2]}', function(v) assert.are.equal(2, v.a[2]) end },
    { "duplicate keys: the last wins", '{"a":1,"a":2}', '{"a":2}',
      function(v) assert.are.equal(2, v.a) end },
    { "all one-letter escapes", '"\\"\\\\\\/\\b\\f\\n\\r\\t"',
      '"\\"\\\\/\\b\\f\\n\\r\\t"', function(v)
        assert.are.equal('"\\/\b\f\n\r\t', v)
      end },
    { "\\u0000 alone", '"\\u0000"', '"\\u0000"', function(v)
      assert.are.equal("\0", v)
    end },
    { "\\u001f and \\u007f", '"\\u001f\\u007f"', '"\\u001f\127"',
      function(v) assert.are.equal("\31\127", v) end },
    { "two-byte UTF-8 bounds", '"\\u0080\\u07ff"', '"\u{80}\u{7ff}"',
      function(v) assert.are.equal("\xc2\x80\xdf\xbf", v) end },
    { "three-byte UTF-8 bounds", '"\\u0800\\uffff"', '"\u{800}\u{ffff}"',
      function(v) assert.are.equal("\xe0\xa0\x80\xef\xbf\xbf", v) end },
    { "upper-case hex digits", '"\\u00E9\\u00e9"', '"\u{e9}\u{e9}"',
      function(v) assert.are.equal("\xc3\xa9\xc3\xa9", v) end },
    { "first code point above the BMP", '"\\ud800\\udc00"', '"\u{10000}"',
      function(v) assert.are.equal("\xf0\x90\x80\x80", v) end },
    { "last code point", '"\\udbff\\udfff"', '"\u{10FFFF}"', function(v)
      assert.are.equal("\xf4\x8f\xbf\xbf", v)
    end },
    { "raw four-byte UTF-8", '"\u{1F600}\u{10FFFF}"',
      '"\u{1F600}\u{10FFFF}"', function(v) assert.are.equal(8, #v) end },
    { "DEL is not a control character", '"\127"', '"\127"', function(v)
      assert.are.equal("\127", v)
    end },
    { "escapes in a key", '{"\\u0041\\n\\u0000":1}', '{"A\\n\\u0000":1}',
      function(v) assert.are.equal(1, v["A\n\0"]) end },
    { "empty key and empty string", '{"":""}', '{"":""}', function(v)
      assert.are.equal("", v[""])
    end },
    { "long strings, escapes far apart",
      '"' .. string.rep("abcdefgh", 40) .. '\\n' .. string.rep("é", 40)
        .. '\\t"',
      '"' .. string.rep("abcdefgh", 40) .. '\\n' .. string.rep("é", 40)
        .. '\\t"', function(v) assert.are.equal(320 + 1 + 80 + 1, #v) end },
    { "zero", "0", "0", function(v)
      assert.are.equal("integer", math.type(v))
    end },
    { "integral zero float", "0.0", "0.0", function(v)
      assert.are.equal("float", math.type(v))
    end },
    { "zero with an exponent is a float", "0e0", "0.0", function(v)
      assert.are.equal("float", math.type(v))
    end },
    { "negative zero with an exponent", "-0e-0", "-0.0", function(v)
      assert.are.equal(-math.huge, 1 / v)
    end },
    { "upper-case E with a sign", "1E+2", "100.0", function(v)
      assert.are.equal(100.0, v)
    end },
    { "negative exponent", "1e-2", "0.01", function(v)
      assert.are.equal(0.01, v)
    end },
    { "exponent with leading zeros", "1e007", "10000000.0", function(v)
      assert.are.equal(1e7, v)
    end },
    { "fraction and exponent", "123.456e-7", "0.0000123456", function(v)
      assert.are.equal(123.456e-7, v)
    end },
    { "largest double", "1.7976931348623157e308",
      "1.7976931348623157e+308", function(v)
        assert.are.equal(1.7976931348623157e308, v)
      end },
    { "smallest normal double", "2.2250738585072014e-308",
      "2.2250738585072014e-308", function(v)
        assert.are.equal(2.2250738585072014e-308, v)
      end },
    { "1e22 (fast path)", "1e22", "1e+22", function(v)
      assert.are.equal(1e22, v)
    end },
    { "1e23 (exact beyond the fast path)", "1e23", "1e+23", function(v)
      assert.are.equal(1e23, v)
    end },
    { "more digits than a double holds", "3.14159265358979323846264338",
      "3.141592653589793", function(v)
        assert.are.equal(math.pi, v)
      end },
    { "twenty-digit mantissa", "12345678901234567890e-10",
      "1234567890.1234567", function(v)
        assert.are.equal(1234567890.1234567, v)
      end },
    { "many leading zeros after the point", "0.000000000000000000000000000001",
      "1e-30", function(v) assert.are.equal(1e-30, v) end },
    { "halfway between two doubles rounds to even",
      "1.00000000000000011102230246251565404236316680908203125", "1.0",
      function(v) assert.are.equal(1.0, v) end },
    { "just above halfway rounds up",
      "1.00000000000000011102230246251565404236316680908203126",
      "1.0000000000000002", function(v)
        assert.are.equal(1.0000000000000002, v)
      end },
    { "2^53+1 as a real rounds to even", "9007199254740993.0",
      "9007199254740992.0", function(v)
        assert.are.equal(2.0 ^ 53, v)
      end },
    { "negative underflow to -0.0", "-1e-400", "-0.0", function(v)
      assert.are.equal(-math.huge, 1 / v)
    end },
    { "zero with a huge exponent", "0e99999999999999999999", "0.0",
      function(v) assert.are.equal(0.0, v) end },
    { "a huge negative exponent", "1e-99999999999999999999", "0.0",
      function(v) assert.are.equal(0.0, v) end },
    { "every kind of whitespace between every token",
      ' \t\r\n[ \t\r\n1 \t\r\n, \t\r\n{ \t\r\n"a" \t\r\n: \t\r\nnull'
        .. ' \t\r\n} \t\r\n] \t\r\n', '[1,{"a":null}]', function(v)
        assert.are.equal(null, v[2].a)
      end },
    { "duplicate keys of other types: the last wins",
      '{"a":[1],"b":0,"a":{"c":2}}', '{"a":{"c":2},"b":0}', function(v)
        assert.are.equal(2, v.a.c)
      end },
    { "arrays of 15, 16, 17 and 33 items", (function()
        local parts = {}
        for i, n in ipairs({ 15, 16, 17, 33 }) do
          local items = {}
          for j = 1, n do items[j] = tostring(j) end
          parts[i] = "[" .. table.concat(items, ",") .. "]"
        end
        return "[" .. table.concat(parts, ",") .. "]"
      end)(), nil, function(v)
        for i, n in ipairs({ 15, 16, 17, 33 }) do
          assert.are.equal(n, #v[i])
          assert.are.equal(n, v[i][n])
          assert.is_true(json.is_array(v[i]))
        end
      end },
    { "40 members, keys repeated on both sides of 16", (function()
        local parts = {}
        for i = 1, 40 do
          parts[i] = string.format('"k%d":%d', i % 25, i)
        end
        return "{" .. table.concat(parts, ",") .. "}"
      end)(), nil, function(v)
        local n = 0
        for _ in pairs(v) do n = n + 1 end
        assert.are.equal(25, n)
        assert.are.equal(40, v.k15)  -- 15 and 40: the last wins
        assert.are.equal(26, v.k1)   -- 1 and 26
        assert.are.equal(24, v.k24)
      end },
    { "arrays of 1 to 40 items, every item in its place", (function()
        local parts = {}
        for n = 1, 40 do
          local items = {}
          for j = 1, n do items[j] = tostring(n * 100 + j) end
          parts[n] = "[" .. table.concat(items, ",") .. "]"
        end
        return "[" .. table.concat(parts, ",") .. "]"
      end)(), nil, function(v)
        for n = 1, 40 do
          assert.are.equal(n, #v[n])
          for j = 1, n do assert.are.equal(n * 100 + j, v[n][j]) end
        end
      end },
    { "a key repeated by the last member, before and past 16", (function()
        local parts = {}
        for n = 2, 20 do
          local m = {}
          for j = 1, n - 1 do m[j] = string.format('"k%d":%d', j, j) end
          m[n] = string.format('"k1":%d', -n)
          parts[#parts + 1] = "{" .. table.concat(m, ",") .. "}"
        end
        return "[" .. table.concat(parts, ",") .. "]"
      end)(), nil, function(v)
        for n = 2, 20 do
          local o, count = v[n - 1], 0
          for _ in pairs(o) do count = count + 1 end
          assert.are.equal(n - 1, count)
          assert.are.equal(-n, o.k1)
          for j = 2, n - 1 do assert.are.equal(j, o["k" .. j]) end
        end
      end },
    { "a thousand items", "[" .. string.rep("1,", 999) .. "1]",
      "[" .. string.rep("1,", 999) .. "1]", function(v)
        assert.are.equal(1000, #v)
      end },
  }

  describe("round trips", function()
    for _, case in ipairs(round_trips) do
      local name, text, canonical, check = case[1], case[2], case[3], case[4]
      it(name, function()
        local v, err = decode(text)
        assert.is_nil(err)
        check(v)
        -- nil: the canonical text is the text's own re-encoding.
        canonical = canonical or encode(v)
        assert.are.equal(canonical, encode(v))
        -- The canonical text is a fixed point.
        assert.are.equal(canonical, encode(decode(canonical)))
      end)
    end
  end)

  -- Lua values encode() must write exactly.
  local encodes = {
    { "nil is null", function() return nil end, "null" },
    { "1.0 keeps its dot", function() return 1.0 end, "1.0" },
    { "2^53+1 as a float rounds to 2^53", function() return 2.0 ^ 53 + 1 end,
      "9007199254740992.0" },
    { "2^63 float", function() return 2.0 ^ 63 end, "9.223372036854776e+18" },
    { "NaN is null", function() return 0 / 0 end, "null" },
    { "inf is null", function() return math.huge end, "null" },
    { "-inf is null", function() return -math.huge end, "null" },
    { "NaN inside an array", function() return { 1, 0 / 0 } end, "[1,null]" },
    { "keys sorted bytewise", function()
      return { b = 1, a = 2, B = 3, [""] = 4, aa = 5, ["a\0"] = 6 }
    end, '{"":4,"B":3,"a":2,"a\\u0000":6,"aa":5,"b":1}' },
    { "many keys sorted", function()
      local t = {}
      for i = 20, 1, -1 do t[string.format("k%02d", i)] = i end
      return t
    end, (function()
      local parts = {}
      for i = 1, 20 do parts[i] = string.format('"k%02d":%d', i, i) end
      return "{" .. table.concat(parts, ",") .. "}"
    end)() },
    { "empty plain table is an object", function() return {} end, "{}" },
    { "json.array() is an empty array", function() return json.array() end,
      "[]" },
    { "json.array(t) marks t", function() return json.array({ 1, 2 }) end,
      "[1,2]" },
    { "sequence is an array", function() return { "a", "b" } end,
      '["a","b"]' },
    { "null sentinel inside an object", function()
      return { a = null }
    end, '{"a":null}' },
    { "control bytes escaped, DEL kept", function() return "\1\31\127" end,
      '"\\u0001\\u001f\127"' },
    { "metatables are ignored (raw access)", function()
      return setmetatable({ a = 1 }, { __index = { b = 2 } })
    end, '{"a":1}' },
  }

  describe("encode writes", function()
    for _, case in ipairs(encodes) do
      it(case[1], function()
        assert.are.equal(case[3], encode(case[2]()))
      end)
    end

    -- Strings with nothing to escape are found 8 bytes at a time (the
    -- last, short word read in overlapping pieces): a byte that needs a
    -- look at any position of any length takes the careful path.
    it("strings of 0 to 24 bytes with a byte to look at anywhere", function()
      local special = {
        { '"', '\\"' }, { "\\", "\\\\" }, { "\n", "\\n" },
        { "\1", "\\u0001" }, { "\31", "\\u001f" }, { "\0", "\\u0000" },
        { "\127", "\127" }, { "\195\169", "\195\169" },
      }
      for n = 0, 24 do
        local plain = string.rep("a", n)
        assert.are.equal('"' .. plain .. '"', encode(plain))
        for p = 1, n do
          for _, sp in ipairs(special) do
            local s = plain:sub(1, p - 1) .. sp[1] .. plain:sub(p + 1)
            local want = '"' .. plain:sub(1, p - 1) .. sp[2]
              .. plain:sub(p + 1) .. '"'
            assert.are.equal(want, encode(s))
          end
          local bad = plain:sub(1, p - 1) .. "\255" .. plain:sub(p + 1)
          local none, err = encode(bad)
          assert.is_nil(none)
          assert.are.equal(string.format("EVALUE: invalid UTF-8 in string "
            .. "(byte %d) at $", p - 1), err)
        end
      end
    end)

    -- The encoder writes an object from the pairs its one walk kept on
    -- the stack, making room in batches of 16 pairs: every size around
    -- those batches, with values of each kind, against text built here.
    it("objects of 0 to 70 keys, each value kind", function()
      local kinds = {
        { 1, "1" }, { 0.5, "0.5" }, { "s", '"s"' }, { true, "true" },
        { null, "null" }, { {}, "{}" }, { { 1 }, "[1]" },
        { { a = { b = 2.0 } }, '{"a":{"b":2.0}}' },
      }
      for n = 0, 70 do
        local t, parts = {}, {}
        for i = n, 1, -1 do -- inserted backwards: the walk is unsorted
          t[string.format("k%03d", i)] = kinds[i % #kinds + 1][1]
        end
        for i = 1, n do
          parts[i] = string.format('"k%03d":%s', i, kinds[i % #kinds + 1][2])
        end
        local want = "{" .. table.concat(parts, ",") .. "}"
        assert.are.equal(want, encode(t))
        assert.are.equal("[" .. want .. "]", encode({ t }))
      end
    end)
  end)

  -- Each case: name, JSON text, the whole message after "EPARSE: ".
  -- Positions: line and column count from 1 (columns in bytes), the byte
  -- offset from 0; they point at the first offending byte.
  local bad_texts = {
    { "empty input", "", "empty input (expected a JSON value)" },
    { "only whitespace", " \n\t ",
      "expected a JSON value near end of file at line 2 column 3 (byte 4)" },
    -- Structure.
    { "trailing comma in an array", "[1,]",
      "trailing comma near ']' at line 1 column 4 (byte 3)" },
    { "trailing comma in an object", '{"a":1,}',
      "trailing comma near '}' at line 1 column 8 (byte 7)" },
    { "leading comma", "[,1]",
      "expected a JSON value near ',' at line 1 column 2 (byte 1)" },
    { "double comma", "[1,,2]",
      "expected a JSON value near ',' at line 1 column 4 (byte 3)" },
    { "missing comma in an array", "[1 2]",
      "',' or ']' expected near '2' at line 1 column 4 (byte 3)" },
    { "missing comma in an object", '{"a":1 "b":2}',
      "',' or '}' expected near '\"b\"' at line 1 column 8 (byte 7)" },
    { "missing colon", '{"a" 1}',
      "':' expected near '1' at line 1 column 6 (byte 5)" },
    { "double colon", '{"a"::1}',
      "expected a JSON value near ':' at line 1 column 6 (byte 5)" },
    { "missing value", '{"a":}',
      "expected a JSON value near '}' at line 1 column 6 (byte 5)" },
    { "unquoted key", "{a:1}",
      "string key or '}' expected near 'a' at line 1 column 2 (byte 1)" },
    { "number as a key", "{1:2}",
      "string key or '}' expected near '1' at line 1 column 2 (byte 1)" },
    { "single-quoted key", "{'a':1}",
      "string key or '}' expected near ''a'' at line 1 column 2 (byte 1)" },
    { "single-quoted string", "'a'",
      "invalid token near ''a'' at line 1 column 1 (byte 0)" },
    { "mismatched brackets", "[1}",
      "',' or ']' expected near '}' at line 1 column 3 (byte 2)" },
    { "mismatched braces", '{"a":1]',
      "',' or '}' expected near ']' at line 1 column 7 (byte 6)" },
    { "unclosed array", "[1,2",
      "',' or ']' expected near end of file at line 1 column 5 (byte 4)" },
    { "unclosed object", '{"a":1',
      "',' or '}' expected near end of file at line 1 column 7 (byte 6)" },
    { "unclosed empty array", "[",
      "expected a JSON value near end of file at line 1 column 2 (byte 1)" },
    { "lone closing bracket", "]",
      "expected a JSON value near ']' at line 1 column 1 (byte 0)" },
    { "garbage after the value", "[1] x",
      "end of file expected near 'x' at line 1 column 5 (byte 4)" },
    { "two values", "1 2",
      "end of file expected near '2' at line 1 column 3 (byte 2)" },
    { "an extra closing bracket", "[1]]",
      "end of file expected near ']' at line 1 column 4 (byte 3)" },
    { "a comment", "[1] // x",
      "end of file expected near '//' at line 1 column 5 (byte 4)" },
    { "a block comment", "/* x */ 1",
      "invalid token near '/*' at line 1 column 1 (byte 0)" },
    { "a byte-order mark", "\xef\xbb\xbf{}",
      "invalid token near '???' at line 1 column 1 (byte 0)" },
    { "a NUL byte after the value", "1\0",
      "end of file expected near '?' at line 1 column 2 (byte 1)" },
    -- Literals.
    { "truncated literal", "nul",
      "invalid token near 'nul' at line 1 column 1 (byte 0)" },
    { "literal with a tail", "truex",
      "invalid token near 'truex' at line 1 column 1 (byte 0)" },
    { "capitalised literal", "True",
      "invalid token near 'True' at line 1 column 1 (byte 0)" },
    { "upper-case null", "NULL",
      "invalid token near 'NULL' at line 1 column 1 (byte 0)" },
    { "NaN", "NaN", "invalid token near 'NaN' at line 1 column 1 (byte 0)" },
    { "Infinity", "[Infinity]",
      "invalid token near 'Infinity' at line 1 column 2 (byte 1)" },
    { "-Infinity", "-Infinity",
      "invalid number near '-Infinity' at line 1 column 1 (byte 0)" },
    -- Numbers.
    { "leading zero", "01", "invalid number near '01' at line 1 column 1 "
      .. "(byte 0)" },
    { "negative leading zero", "[-01]",
      "invalid number near '-01' at line 1 column 2 (byte 1)" },
    { "double zero", "00", "invalid number near '00' at line 1 column 1 "
      .. "(byte 0)" },
    { "leading plus", "+1", "invalid token near '+1' at line 1 column 1 "
      .. "(byte 0)" },
    { "leading dot", ".5", "invalid token near '.5' at line 1 column 1 "
      .. "(byte 0)" },
    { "dangling dot", "1.", "invalid number near '1.' at line 1 column 1 "
      .. "(byte 0)" },
    { "dot before the exponent", "1.e5",
      "invalid number near '1.e5' at line 1 column 1 (byte 0)" },
    { "dangling exponent", "1e", "invalid number near '1e' at line 1 column "
      .. "1 (byte 0)" },
    { "exponent sign without digits", "[1.5e+]",
      "invalid number near '1.5e+' at line 1 column 2 (byte 1)" },
    { "lone minus", "-", "invalid number near '-' at line 1 column 1 "
      .. "(byte 0)" },
    { "double minus", "--1", "invalid number near '--1' at line 1 column 1 "
      .. "(byte 0)" },
    { "hexadecimal", "0x10", "invalid number near '0x10' at line 1 column 1 "
      .. "(byte 0)" },
    { "letters after digits", "123abc",
      "invalid number near '123abc' at line 1 column 1 (byte 0)" },
    { "two dots", "1.5.3", "invalid number near '1.5.3' at line 1 column 1 "
      .. "(byte 0)" },
    { "integer above 2^63-1", "9223372036854775808",
      "integer out of range near '9223372036854775808' at line 1 column 1 "
        .. "(byte 0)" },
    { "integer below -2^63", "[-9223372036854775809]",
      "integer out of range near '-9223372036854775809' at line 1 column 2 "
        .. "(byte 1)" },
    { "twenty-digit integer", "99999999999999999999",
      "integer out of range near '99999999999999999999' at line 1 column 1 "
        .. "(byte 0)" },
    { "real above the double range", '{"x":1e400}',
      "number out of range near '1e400' at line 1 column 6 (byte 5)" },
    { "negative real above the double range", "-1.8e308",
      "number out of range near '-1.8e308' at line 1 column 1 (byte 0)" },
    { "a huge exponent", "1e99999999999999999999",
      -- The token in a message is cut to 20 bytes.
      "number out of range near '1e999999999999999999' at line 1 column 1 "
        .. "(byte 0)" },
    -- Strings.
    { "unterminated string", '"abc',
      "unterminated string near end of file at line 1 column 5 (byte 4)" },
    { "unterminated after an escape", '"abc\\',
      "unterminated string near end of file at line 1 column 6 (byte 5)" },
    { "raw tab", '"tab\there"',
      "control character 0x09 in string at line 1 column 5 (byte 4)" },
    { "raw newline", '"a\nb"',
      "control character 0x0a in string at line 1 column 3 (byte 2)" },
    { "raw NUL", '"a\0b"',
      "control character 0x00 in string at line 1 column 3 (byte 2)" },
    { "raw 0x1f", '["\31"]',
      "control character 0x1f in string at line 1 column 3 (byte 2)" },
    { "unknown escape", '"\\x"',
      "invalid escape near '\\x\"' at line 1 column 2 (byte 1)" },
    { "escaped single quote", '"\\\'"',
      "invalid escape near '\\'\"' at line 1 column 2 (byte 1)" },
    { "escaped NUL byte", '"\\\0"',
      "invalid escape near '\\?\"' at line 1 column 2 (byte 1)" },
    { "upper-case U escape", '"\\U0041"',
      "invalid escape near '\\U0041\"' at line 1 column 2 (byte 1)" },
    { "short \\u escape", '"\\u12"',
      "invalid \\u escape near '\\u12\"' at line 1 column 2 (byte 1)" },
    { "non-hex \\u escape", '"\\u12G4"',
      "invalid \\u escape near '\\u12G4\"' at line 1 column 2 (byte 1)" },
    { "lone high surrogate", '"\\ud800"',
      "unpaired surrogate '\\ud800' in string at line 1 column 2 (byte 1)" },
    { "lone low surrogate", '"\\udc00"',
      "unpaired surrogate '\\udc00' in string at line 1 column 2 (byte 1)" },
    { "high surrogate then a letter", '"\\ud800\\u0041"',
      "unpaired surrogate '\\ud800' in string at line 1 column 2 (byte 1)" },
    { "two high surrogates", '"\\ud800\\ud800"',
      "unpaired surrogate '\\ud800' in string at line 1 column 2 (byte 1)" },
    { "surrogates in the wrong order", '"\\udc00\\ud800"',
      "unpaired surrogate '\\udc00' in string at line 1 column 2 (byte 1)" },
    { "high surrogate then raw text", '"x\\ud83dabcdef"',
      "unpaired surrogate '\\ud83d' in string at line 1 column 3 (byte 2)" },
    { "invalid UTF-8 byte", '"\255"',
      "invalid UTF-8 byte 0xff in string at line 1 column 2 (byte 1)" },
    { "stray continuation byte", '"a\x80"',
      "invalid UTF-8 byte 0x80 in string at line 1 column 3 (byte 2)" },
    { "overlong two-byte form", '"\xc0\x80"',
      "invalid UTF-8 byte 0xc0 in string at line 1 column 2 (byte 1)" },
    { "overlong three-byte form", '"\xe0\x80\x80"',
      "invalid UTF-8 byte 0xe0 in string at line 1 column 2 (byte 1)" },
    { "overlong four-byte form", '"\xf0\x80\x80\x80"',
      "invalid UTF-8 byte 0xf0 in string at line 1 column 2 (byte 1)" },
    { "UTF-8 encoded surrogate", '"\xed\xa0\x80"',
      "invalid UTF-8 byte 0xed in string at line 1 column 2 (byte 1)" },
    { "code point above U+10FFFF", '"\xf4\x90\x80\x80"',
      "invalid UTF-8 byte 0xf4 in string at line 1 column 2 (byte 1)" },
    { "truncated sequence", '"ab\xc3"',
      "invalid UTF-8 byte 0xc3 in string at line 1 column 4 (byte 3)" },
    { "truncated sequence before a letter", '"\xe2\x82x"',
      "invalid UTF-8 byte 0xe2 in string at line 1 column 2 (byte 1)" },
    { "invalid UTF-8 in a key", '{"k\xff":1}',
      "invalid UTF-8 byte 0xff in string at line 1 column 4 (byte 3)" },
    { "invalid UTF-8 after a long clean run",
      '"' .. string.rep("x", 37) .. '\xff"',
      "invalid UTF-8 byte 0xff in string at line 1 column 39 (byte 38)" },
    -- Positions on later lines.
    { "error position on a later line", "[\n1,\n2,\nx]",
      "invalid token near 'x' at line 4 column 1 (byte 8)" },
    { "CRLF line ends", '{\r\n  "a": 1,\r\n  "b": tru\r\n}',
      "invalid token near 'tru' at line 3 column 8 (byte 21)" },
  }

  describe("decode refuses", function()
    for _, case in ipairs(bad_texts) do
      it(case[1], function()
        local v, err, code = decode(case[2])
        assert.is_nil(v)
        assert.are.equal("EPARSE", code)
        assert.are.equal("EPARSE: " .. case[3], err)
      end)
    end

    -- A sample using every kind of token; every proper prefix of it is
    -- incomplete, so each must give EPARSE (and never crash).
    local sample = '{"a":[1,-2.5e-3,true,false,null,"x\\u00e9\\ud83d\\ude00'
      .. '\\n"],"b":{"c":{}},"d":[],"\\u0041":"\u{20AC}","e":12345678901,'
      .. '"f":0.1}'

    it("every truncation of a sample document", function()
      assert.is_table(decode(sample))
      for n = 0, #sample - 1 do
        local v, err, code = decode(sample:sub(1, n))
        assert.is_nil(v, n)
        assert.are.equal("EPARSE", code)
        assert.is_truthy(err:find("^EPARSE: "), err)
      end
    end)

    it("every single-byte change of the sample fails or decodes cleanly",
      function()
        local bytes = { 0, 9, 10, 31, 34, 44, 45, 46, 48, 58, 91, 92, 93,
          101, 110, 117, 123, 125, 127, 128, 192, 255 }
        for i = 1, #sample do
          for _, b in ipairs(bytes) do
            local text = sample:sub(1, i - 1) .. string.char(b)
              .. sample:sub(i + 1)
            local v, err, code = decode(text)
            if v == nil then
              assert.are.equal("EPARSE", code)
              assert.is_truthy(err:find("^EPARSE: .* at line %d+ column %d+ "
                .. "%(byte %d+%)$"), err)
            else
              -- What decodes encodes again.
              assert.is_string(encode(v))
            end
          end
        end
      end)

    it("many truncations of a large document", function()
      local parts = {}
      for i = 1, 300 do
        parts[i] = string.format('{"k%d":[%d,%d.5,"s\\t%d",null]}', i, i, i,
          i)
      end
      local big = "[" .. table.concat(parts, ",") .. "]"
      assert.are.equal(300, #decode(big))
      for n = 1, #big - 1, 7 do
        local v, _, code = decode(big:sub(1, n))
        assert.is_nil(v)
        assert.are.equal("EPARSE", code)
      end
    end)
  end)

  describe("round trips of generated values", function()
    -- A random UTF-8 string of up to 12 characters, all planes.
    local function gen_string()
      local cs = {}
      for i = 1, math.random(0, 12) do
        local k = math.random(6)
        cs[i] = k == 1 and utf8.char(math.random(0, 0x7f))
          or k == 2 and utf8.char(math.random(0x80, 0xd7ff))
          or k == 3 and utf8.char(math.random(0xe000, 0x10ffff))
          or string.char(math.random(32, 126))
      end
      return table.concat(cs)
    end

    -- A random JSON-able Lua value, `depth` levels deep at most.
    local function gen(depth)
      local r = math.random(depth > 0 and 9 or 6)
      if r == 1 then return null end
      if r == 2 then return math.random(2) == 1 end
      if r == 3 then
        return math.random(math.mininteger, math.maxinteger)
      end
      if r == 4 then
        return (math.random() - 0.5) * 10.0 ^ math.random(-300, 300)
      end
      if r <= 6 then return gen_string() end
      local t = {}
      if r <= 8 then
        for i = 1, math.random(0, 5) do t[i] = gen(depth - 1) end
        return json.array(t)
      end
      for _ = 1, math.random(0, 5) do t[gen_string()] = gen(depth - 1) end
      return t
    end

    -- Deep equality that tells integers from floats and arrays from
    -- objects.
    local function same(a, b)
      if type(a) ~= type(b) then return false end
      if type(a) == "number" then
        return math.type(a) == math.type(b) and (a == b or a ~= a)
      end
      if type(a) ~= "table" or a == null or b == null then return a == b end
      if json.is_array(a) ~= json.is_array(b) then return false end
      for k, v in pairs(a) do
        if not same(v, b[k]) then return false end
      end
      for k in pairs(b) do
        if a[k] == nil then return false end
      end
      return true
    end

    -- The reference: JSON's escapes written out in Lua, one byte at a
    -- time (UTF-8 passes through as it is).
    local function escaped(str)
      local short = { ['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n",
        ["\r"] = "\\r", ["\t"] = "\\t", ["\b"] = "\\b", ["\f"] = "\\f" }
      return '"' .. str:gsub("[%z\1-\31\"\\]", function(c)
        return short[c] or string.format("\\u%04x", c:byte())
      end) .. '"'
    end

    it("strings: each escape, at each position of strings of 0-20 bytes",
      function()
        local specials = { '"', "\\", "\n", "\0", "\1", "\31", "\127",
          "é", "\u{10348}", " " }
        for len = 0, 20 do
          for pos = 1, len do
            for _, sp in ipairs(specials) do
              local str = ("abcdefghijklmnopqrstu"):sub(1, pos - 1) .. sp
                .. ("ABCDEFGHIJKLMNOPQRSTU"):sub(pos + 1, len)
              assert.are.equal(escaped(str), encode(str))
              assert.are.equal(str, decode(encode(str)))
            end
          end
        end
      end)

    it("strings: many escapes in one string, at every alignment "
      .. "(JSON text quoted as a string, as ludo eval passes results)",
      function()
        local parts = { '"', "\\", "\n", "\0", "\31", "a", "bc", "defgh",
          "ijklmnopq", "é", "\u{10348}", "{\"k\":[1,\"x\"]}" }
        math.randomseed(6455)
        for _ = 1, 2000 do
          local t = {}
          for i = 1, math.random(0, 40) do
            t[i] = parts[math.random(#parts)]
          end
          local str = table.concat(t)
          local text = escaped(str)
          assert.are.equal(text, encode(str))
          assert.are.equal(str, decode(text))
          -- the same with \u escapes for every byte below 0x80
          local u = '"' .. str:gsub("[%z\1-\127]", function(c)
            return string.format("\\u%04x", c:byte())
          end) .. '"'
          assert.are.equal(str, decode(u))
        end
      end)

    it("strings: invalid UTF-8 at any position is refused", function()
      for len = 1, 20 do
        for pos = 1, len do
          local str = ("x"):rep(pos - 1) .. "\255" .. ("y"):rep(len - pos)
          local text, err = encode(str)
          assert.is_nil(text)
          assert.matches("^EVALUE: invalid UTF%-8 in string %(byte "
            .. (pos - 1) .. "%)", err)
        end
      end
    end)

    it("decode(encode(v)) is v and the text is a fixed point", function()
      math.randomseed(8259)
      for _ = 1, 3000 do
        local v = gen(4)
        local text = assert(encode(v))
        local back = decode(text)
        assert.is_true(same(v, back), text)
        assert.are.equal(text, encode(back))
      end
    end)
  end)

  describe("memory", function()
    local host = require("ludo.host")

    it("a huge array under a small memory cap fails with ENOMEM and the "
      .. "session recovers", function()
        local cap = 4 << 20
        local rt = assert(host.runtime({ module_path = ".", prewarm = 0,
          memory_cap = cap, cpu_budget_ms = 20000,
          max_input_bytes = 64 << 20 }))
        local env = assert(rt:load("examples/echo"))
        local s = assert(env:open())
        assert(s:reset())
        local items = '{"message":"hi","pad":[' .. string.rep("0,", 1 << 21)
          .. "0]}"
        local escaped = '{"message":"' .. string.rep("\\u00e9", 1 << 21)
          .. '"}'
        for _, text in ipairs({ items, escaped }) do
          local out, err, code = s:step(text)
          assert.is_nil(out)
          assert.are.equal("ENOMEM", code, err)
          assert.is_true(s:memory() <= cap)
          local ok = assert(s:step('{"message":"hi"}'))
          assert.are.equal("hi", decode(ok).observation.echoed_message)
        end
        rt:close()
      end)
  end)

  describe("boolean schemas", function()
    local host = require("ludo.host")
    local FIX = "spec/fixtures/functional/"
    local rt

    before_each(function()
      rt = assert(host.runtime({ module_path = ".", prewarm = 0 }))
    end)

    after_each(function()
      rt:close()
    end)

    -- Each case: an action, and nil when it passes or the ESCHEMA message.
    local cases = {
      { "{}", nil },
      { '{"never":1}', "action.never: not allowed (the schema is false)" },
      { '{"never":null}', "action.never: not allowed (the schema is false)" },
      { '{"always":[1,{"x":null}]}', nil },
      { '{"none":[]}', nil },
      { '{"none":[1]}', "action.none[0]: not allowed (the schema is false)" },
      { '{"all":[1,"x",{}]}', nil },
      { '{"pick":3}', nil },
      { '{"pick":"x"}',
        "action.pick: does not match anyOf (0 of 2 alternatives matched)" },
      { '{"both":1}',
        "action.both: does not match allOf (alternative 2 of 2 does not)" },
    }

    for _, case in ipairs(cases) do
      it((case[2] and "false rejects " or "true accepts ") .. case[1],
        function()
          local s = assert(assert(rt:load(FIX .. "json_schema")):open())
          assert(s:reset())
          local out, err, code = s:step(case[1])
          if case[2] == nil then
            assert.is_string(out, err)
          else
            assert.is_nil(out)
            assert.are.equal("ESCHEMA", code)
            assert.are.equal("ESCHEMA: " .. case[2], err)
          end
        end)
    end

    it("a schema that is false at its root rejects every action", function()
      local s = assert(assert(rt:load(FIX .. "json_schema_false")):open())
      assert(s:reset())
      for _, action in ipairs({ "{}", "1", "null", "[]", '"x"' }) do
        local out, err, code = s:step(action)
        assert.is_nil(out)
        assert.are.equal("ESCHEMA", code, err)
      end
    end)
  end)

  -- Each case: name, a function building the value, the expected message
  -- (plain text, the whole message: "EVALUE: <what> at <path>").
  local bad_values = {
    { "invalid UTF-8", function() return "ab\255" end,
      "EVALUE: invalid UTF-8 in string (byte 2) at $" },
    { "invalid UTF-8 deep inside", function()
      return { a = { b = { "ok", "\xc3" } } }
    end, "EVALUE: invalid UTF-8 in string (byte 0) at $.a.b[1]" },
    { "overlong encoding", function() return "\xc0\x80" end,
      "EVALUE: invalid UTF-8 in string (byte 0) at $" },
    { "UTF-8 encoded surrogate", function() return "x\xed\xa0\x80" end,
      "EVALUE: invalid UTF-8 in string (byte 1) at $" },
    { "code point above U+10FFFF", function() return "\xf4\x90\x80\x80" end,
      "EVALUE: invalid UTF-8 in string (byte 0) at $" },
    { "truncated sequence", function() return "\xe2\x82" end,
      "EVALUE: invalid UTF-8 in string (byte 0) at $" },
    { "invalid UTF-8 in a key", function() return { ["k\255"] = 1 } end,
      "EVALUE: invalid UTF-8 in string (byte 1) at $.k\255" },
    { "function", function() return { a = print } end,
      "EVALUE: cannot encode a function at $.a" },
    { "thread", function() return { coroutine.create(print) } end,
      "EVALUE: cannot encode a thread at $[0]" },
    { "userdata", function() return { x = { io.stdout } } end,
      "EVALUE: cannot encode a userdata at $.x[0]" },
    { "mixed table", function() return { 1, 2, x = 3 } end,
      "EVALUE: table mixes array items and keys at $" },
    { "sparse array", function() return { a = { 1, nil, 3 } } end,
      "EVALUE: sparse array (holes between 1 and n) at $.a" },
    { "array not starting at 1", function() return { [2] = "b" } end,
      "EVALUE: sparse array (holes between 1 and n) at $" },
    { "float key", function() return { [1.5] = 1 } end,
      "EVALUE: table key of type number (keys must be strings, or 1..n for "
        .. "arrays) at $" },
    { "zero key", function() return { [0] = 1 } end,
      "EVALUE: table key of type number (keys must be strings, or 1..n for "
        .. "arrays) at $" },
    { "boolean key", function() return { list = { [true] = 1 } } end,
      "EVALUE: table key of type boolean (keys must be strings, or 1..n for "
        .. "arrays) at $.list" },
    { "array with string keys", function()
      return json.array({ a = 1 })
    end, "EVALUE: array has string keys at $" },
    -- A bad key met after many good ones (past the encoder's batches of
    -- kept pairs) is named as it is when met first.
    { "boolean key among many string keys", function()
      local t = { [true] = 1 }
      for i = 1, 40 do t["k" .. i] = i end
      return { x = t }
    end, "EVALUE: table key of type boolean (keys must be strings, or 1..n "
      .. "for arrays) at $.x" },
    { "array item among many string keys", function()
      local t = {}
      for i = 1, 40 do t["k" .. i] = i end
      t[1] = "one"
      return t
    end, "EVALUE: table mixes array items and keys at $" },
    { "many string keys in an array", function()
      local t = {}
      for i = 1, 40 do t["k" .. i] = i end
      return { json.array(t) }
    end, "EVALUE: array has string keys at $[0]" },
  }

  describe("encode refuses", function()
    for _, case in ipairs(bad_values) do
      it(case[1], function()
        local text, err, code = encode(case[2]())
        assert.is_nil(text)
        assert.are.equal("EVALUE", code)
        assert.are.equal(case[3], err)
      end)
    end

    it("a cycle, as nesting deeper than the limit", function()
      local t = {}
      t.self = t
      local text, err, code = encode(t)
      assert.is_nil(text)
      assert.are.equal("EVALUE", code)
      assert.are.equal("EVALUE: nesting deeper than 128 (a cycle?) at $"
        .. string.rep(".self", 128), err)
    end)
  end)

  describe("depth limit", function()
    it("decode accepts 128 levels by default and refuses 129", function()
      local v = decode(nested_text(128, "1"))
      for _ = 1, 127 do v = v[1] end
      assert.are.same({ 1 }, v)
      local none, err, code = decode(nested_text(129, "1"))
      assert.is_nil(none)
      assert.are.equal("EPARSE", code)
      assert.are.equal("EPARSE: nesting deeper than 128 at $"
        .. string.rep("[0]", 128), err)
    end)

    it("decode takes a smaller limit", function()
      assert.are.equal("[[1]]", encode(decode("[[1]]", 2)))
      local none, err = decode("[[[1]]]", 2)
      assert.is_nil(none)
      assert.are.equal("EPARSE: nesting deeper than 2 at $[0][0]", err)
      none, err = decode('{"a":{"b":[[1]]}}', 3)
      assert.is_nil(none)
      assert.are.equal("EPARSE: nesting deeper than 3 at $.a.b[0]", err)
    end)

    it("encode accepts 128 levels by default and refuses 129", function()
      assert.are.equal(nested_text(127, "{}"), encode(nested_table(128)))
      local none, err, code = encode(nested_table(129))
      assert.is_nil(none)
      assert.are.equal("EVALUE", code)
      assert.are.equal("EVALUE: nesting deeper than 128 (a cycle?) at $"
        .. string.rep("[0]", 128), err)
    end)

    it("encode takes a smaller limit", function()
      assert.are.equal("[[{}]]", encode(nested_table(3), 3))
      local none, err = encode(nested_table(3), 2)
      assert.is_nil(none)
      assert.are.equal("EVALUE: nesting deeper than 2 (a cycle?) at $[0][0]",
        err)
    end)

    it("decode counts objects too, and names keys in the path", function()
      local deep = string.rep('{"k":', 128) .. "1" .. string.rep("}", 128)
      local v = decode(deep)
      for _ = 1, 127 do v = v.k end
      assert.are.same({ k = 1 }, v)
      local _, err = decode(string.rep('{"k":', 129) .. "1"
        .. string.rep("}", 129))
      assert.are.equal("EPARSE: nesting deeper than 128 at $"
        .. string.rep(".k", 128), err)
      _, err = decode('[1,2,{"a b":[0,[[1]]]}]', 3)
      assert.are.equal("EPARSE: nesting deeper than 3 at $[2].a b[1]", err)
    end)

    it("decode stops very deep input at the limit", function()
      local _, err = decode(nested_text(100000, "1"))
      assert.are.equal("EPARSE: nesting deeper than 128 at $"
        .. string.rep("[0]", 128), err)
      _, err = decode(string.rep("[", 100000))
      assert.is_truthy(err:find("^EPARSE: nesting deeper than 128"), err)
    end)

    it("a limit above 128 is clamped to 128", function()
      assert.is_nil(decode(nested_text(129, "1"), 1000))
      assert.is_nil(encode(nested_table(129), 1000))
    end)
  end)

  describe("arrays", function()
    it("is_array tells marked tables from others", function()
      assert.is_true(json.is_array(decode("[1]")))
      assert.is_true(json.is_array(json.array({})))
      assert.is_false(json.is_array(decode('{"a":1}')))
      assert.is_false(json.is_array({ 1, 2 }))
      assert.is_false(json.is_array("[]"))
      assert.is_false(json.is_array(nil))
    end)

    it("array() returns the table it marks", function()
      local t = { 1 }
      assert.are.equal(t, json.array(t))
    end)
  end)

  describe("arguments", function()
    it("decode raises on a non-string", function()
      assert.has_error(function() decode(nil) end)
      assert.has_error(function() decode({}) end)
    end)

    it("encode raises without a value", function()
      assert.has_error(function() encode() end)
    end)
  end)
end)
