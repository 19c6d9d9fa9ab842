-- spec/unit/re_spec.lua: ludo.re, the pcre2 binding (runtime/script/lre.c).
-- Table-driven: each section lists valid and invalid cases side by side.
local re = require("ludo.re")

local function fmt(v)
  if type(v) == "string" then return string.format("%q", v) end
  return tostring(v)
end

-- Captures everything a call returns.
local function pack(...) return table.pack(...) end

-- Asserts a runtime failure: nil, "EREGEX: ...", "EREGEX".
local function assert_fail(msg_pattern, ok, msg, code, code_name)
  assert.is_nil(ok)
  assert.is_string(msg)
  assert.matches(msg_pattern, msg)
  assert.equal(code_name or "EREGEX", code)
end

describe("ludo.re", function()
  describe("match", function()
    -- { subject, pattern, flags, init, expected match table }
    local cases = {
      { "hello world", "o w", nil, nil, { [0] = "o w" } },
      { "hello world", "(\\w+) (\\w+)", nil, nil,
        { [0] = "hello world", "hello", "world" } },
      { "2024-05-06", "(?<y>\\d+)-(?<m>\\d+)-(?<d>\\d+)", nil, nil,
        { [0] = "2024-05-06", "2024", "05", "06",
          y = "2024", m = "05", d = "06" } },
      { "ac", "a(b)?c", nil, nil, { [0] = "ac", false } },
      { "ac", "a(?<opt>b)?c", nil, nil, { [0] = "ac", false, opt = false } },
      { "xay", "(x)|(a)", nil, nil, { [0] = "x", "x", false } },
      { "xay", "(x)|(a)", nil, 2, { [0] = "a", false, "a" } },
      { "abcabc", "b", nil, -3, { [0] = "b" } },
      { "abc", "b", nil, -100, { [0] = "b" } },
      { "abc", "", nil, 4, { [0] = "" } },
      { "HeLLo", "hello", "i", nil, { [0] = "HeLLo" } },
      { "a\nb", "^b$", "m", nil, { [0] = "b" } },
      { "a\nb", "a.b", "s", nil, { [0] = "a\nb" } },
      { "ab", "a b  # comment", "x", nil, { [0] = "ab" } },
      { "xab", "ab", "a", 2, { [0] = "ab" } },
      { "aaa", "a+", "U", nil, { [0] = "a" } },
      { "aaa", "a+?", "U", nil, { [0] = "aaa" } },
      { "héllo", "h.l", nil, nil, { [0] = "hél" } },
      { "héllo", "h..l", "b", nil, { [0] = "hél" } },
      { "ÉCOLE", "école", "i", nil, { [0] = "ÉCOLE" } },
      { "a\0b", "a\\x00b", nil, nil, { [0] = "a\0b" } },
      { "a\0b", "\0", nil, nil, { [0] = "\0" } },
      { "abab", "(?J)(?<n>x)|(?<n>b)", nil, nil,
        { [0] = "b", false, "b", n = "b" } },
      { "12", "(\\d)(?<two>\\d)", "oj", nil,
        { [0] = "12", "1", "2", two = "2" } },
    }
    for i, c in ipairs(cases) do
      it(("case %d: %s ~ %s"):format(i, fmt(c[1]), fmt(c[2])), function()
        assert.same(c[5], re.match(c[1], c[2], c[3], c[4]))
      end)
    end

    -- { subject, pattern, flags, init } that do not match: a single nil.
    local nomatch = {
      { "hello", "x" },
      { "hello", "^l" },
      { "xab", "ab", "a" },
      { "abc", "a", nil, 2 },
      { "abc", "", nil, 5 },
      { "a\nb", "a$", "D" },
      { "héllo", "h.l", "b" },
      { "HELLO", "hello" },
    }
    for i, c in ipairs(nomatch) do
      it(("no match %d: %s ~ %s"):format(i, fmt(c[1]), fmt(c[2])), function()
        local r = pack(re.match(c[1], c[2], c[3], c[4]))
        assert.equal(1, r.n)
        assert.is_nil(r[1])
      end)
    end
  end)

  describe("bad patterns and flags", function()
    -- { pattern, flags, message pattern }
    local cases = {
      { "(", nil, "^EREGEX: missing closing parenthesis at offset 1$" },
      { "a)", nil, "^EREGEX: .* at offset 1$" },
      { "[a", nil, "^EREGEX: missing terminating %] .* at offset 2$" },
      { "a{2,1}", nil, "^EREGEX: .*out of order.* at offset 5$" },
      { "(?<n>a)(?<n>b)", nil,
        "^EREGEX: two named subpatterns have the same name" },
      { "\\", nil, "^EREGEX: \\ at end of pattern at offset 1$" },
      { "a\\C", nil, "^EREGEX: .*\\C.* at offset" },
      { "(*UTF)a", "b", "^EREGEX: .*UTF.* at offset" },
      { "\xff", nil, "^EREGEX: UTF%-8 error" },
      { "a", "q", "^EREGEX: unknown flag 'q'" },
      { "a", "i\1", "^EREGEX: unknown flag '\\x01'" },
      { "a", "ub",
        "^EREGEX: flags 'u' %(UTF%-8%) and 'b' %(bytes%) conflict$" },
    }
    local fns = {
      match = function(p, f) return re.match("subject", p, f) end,
      find = function(p, f) return re.find("subject", p, f) end,
      gmatch = function(p, f) return re.gmatch("subject", p, f) end,
      gsub = function(p, f) return re.gsub("subject", p, "", f) end,
      sub = function(p, f) return re.sub("subject", p, "", f) end,
      split = function(p, f) return re.split("subject", p, f) end,
      compile = function(p, f) return re.compile(p, f) end,
    }
    for i, c in ipairs(cases) do
      for name, fn in pairs(fns) do
        it(("case %d via %s: %s"):format(i, name, fmt(c[1])), function()
          local r = pack(fn(c[1], c[2]))
          assert.equal(3, r.n)
          assert_fail(c[3], r[1], r[2], r[3])
        end)
      end
    end

    it("accepts a bad pattern's bytes above 0x7f in bytes mode", function()
      assert.same({ [0] = "\xff" }, re.match("a\xff", "\xff", "b"))
    end)
  end)

  describe("find", function()
    -- { subject, pattern, flags, init, expected returns }
    local cases = {
      { "hello world", "o w", nil, nil, { 5, 7 } },
      { "hello world", "o (w)(x)?", nil, nil, { 5, 7, "w", false } },
      { "hello", "", nil, nil, { 1, 0 } },
      { "hello", "$", nil, nil, { 6, 5 } },
      { "hello", "l+", nil, -2, { 4, 4 } },
      { "héllo", "l", nil, nil, { 4, 4 } },
      { "hello", "x", nil, nil, { nil } },
      { "hello", "h", nil, 7, { nil } },
    }
    for i, c in ipairs(cases) do
      it(("case %d: %s ~ %s"):format(i, fmt(c[1]), fmt(c[2])), function()
        local r = pack(re.find(c[1], c[2], c[3], c[4]))
        assert.equal(#c[5] == 0 and 1 or #c[5], r.n)
        for k = 1, r.n do assert.equal(c[5][k], r[k]) end
      end)
    end
  end)

  describe("gmatch", function()
    -- { subject, pattern, flags, expected whole matches }
    local cases = {
      { "a1b22c333", "\\d+", nil, { "1", "22", "333" } },
      { "abc", "x*", nil, { "", "", "", "" } },
      { "abc", "\\w*", nil, { "abc", "" } },
      { "héé", "", nil, { "", "", "", "" } },
      { "héé", "", "b", { "", "", "", "", "", "" } },
      { "a\r\nb", "(*CRLF)(?m)$", nil, { "", "" } },
      { "", "", nil, { "" } },
      { "", "x", nil, {} },
      { "aaa", "a", "a", { "a", "a", "a" } },
      { "baaa", "a", "a", {} },
      { "k1=v1, k2=v2", "(?<k>\\w+)=(?<v>\\w+)", nil, { "k1=v1", "k2=v2" } },
    }
    for i, c in ipairs(cases) do
      it(("case %d: %s ~ %s"):format(i, fmt(c[1]), fmt(c[2])), function()
        local got = {}
        for m in re.gmatch(c[1], c[2], c[3]) do got[#got + 1] = m[0] end
        assert.same(c[4], got)
      end)
    end

    it("yields full match tables with named groups", function()
      local got = {}
      for m in re.gmatch("k1=v1, k2=v2", "(?<k>\\w+)=(?<v>\\w+)") do
        got[m.k] = m[2]
      end
      assert.same({ k1 = "v1", k2 = "v2" }, got)
    end)

    it("keeps returning nil once exhausted", function()
      local it_ = re.gmatch("ab", "a")
      assert.equal("a", it_()[0])
      assert.is_nil(it_())
      assert.is_nil(it_())
    end)

    it("returns nil, err from the iterator on invalid UTF-8", function()
      local it_ = re.gmatch("ok \xff", "\\w")
      local r = pack(it_())
      assert.equal(3, r.n)
      assert_fail("^EREGEX: invalid UTF%-8 in subject at offset 3$",
                  r[1], r[2], r[3])
    end)
  end)

  describe("gsub and sub", function()
    -- { subject, pattern, repl, flags, expected string, expected count }
    local cases = {
      { "hello world", "o", "0", nil, "hell0 w0rld", 2 },
      { "hello", "x", "y", nil, "hello", 0 },
      { "abc", "", "-", nil, "-a-b-c-", 4 },
      { "abc", "\\w*", "-", nil, "--", 2 },
      { "héllo", "", ".", nil, ".h.é.l.l.o.", 6 },
      { "john smith", "(\\w+) (\\w+)", "$2 $1", nil, "smith john", 1 },
      { "john smith", "(?<f>\\w+) (?<l>\\w+)", "${l}, ${f}", nil,
        "smith, john", 1 },
      { "a1", "(\\d)", "${1}0", nil, "a10", 1 },
      { "a1", "(\\d)", "[$0]", nil, "a[1]", 1 },
      { "price", "price", "$$5", nil, "$5", 1 },
      { "ac", "a(b)?c", "[$1]", nil, "[]", 1 },
      { "aaa", "a", "b", "a", "bbb", 3 },
      { "AbA", "a", "x", "i", "xbx", 2 },
      { "a.b", "\\.", 7, nil, "a7b", 1 },
      { "", "", "x", nil, "x", 1 },
    }
    for i, c in ipairs(cases) do
      it(("gsub case %d: %s ~ %s"):format(i, fmt(c[1]), fmt(c[2])), function()
        local s, n = re.gsub(c[1], c[2], c[3], c[4])
        assert.equal(c[5], s)
        assert.equal(c[6], n)
      end)
    end

    -- { subject, pattern, repl, expected string, expected count }
    local subs = {
      { "hello world", "o", "0", "hell0 world", 1 },
      { "hello", "x", "y", "hello", 0 },
      { "abc", "", "-", "-abc", 1 },
    }
    for i, c in ipairs(subs) do
      it(("sub case %d: %s ~ %s"):format(i, fmt(c[1]), fmt(c[2])), function()
        local s, n = re.sub(c[1], c[2], c[3])
        assert.equal(c[4], s)
        assert.equal(c[5], n)
      end)
    end

    -- { pattern, template, message pattern }
    local bad = {
      { "(a)", "$2", "no group 2 %(offset 0%)" },
      { "(a)", "x${2}", "no group 2 %(offset 1%)" },
      { "(?<n>a)", "${m}", "no group named 'm'" },
      { "a", "$", "'%$' at offset 0 must be followed" },
      { "a", "ab$x", "'%$' at offset 2 must be followed" },
      { "a", "${", "'%$' at offset 0" },
      { "a", "${1", "'%$' at offset 0" },
      { "a", "${}", "'%$' at offset 0" },
      { "a", "${a-b}", "'%$' at offset 0" },
      { "a", "$99999999", "'%$' at offset 0" },
    }
    for i, c in ipairs(bad) do
      it(("bad template %d: %s"):format(i, fmt(c[2])), function()
        -- Checked before matching: no match needed to report it.
        local r = pack(re.gsub("zzz", c[1], c[2]))
        assert.equal(3, r.n)
        assert_fail("^EREGEX: bad replacement template: " .. c[3],
                    r[1], r[2], r[3])
      end)
    end

    it("calls a function with the match table", function()
      local s, n = re.gsub("a=1, b=2", "(?<k>\\w)=(\\d)", function(m)
        return m.k:upper() .. m[2] * 2
      end)
      assert.equal("A2, B4", s)
      assert.equal(2, n)
    end)

    it("keeps the match when the function returns nil or false", function()
      local i = 0
      local s, n = re.gsub("abcd", "\\w", function(m)
        i = i + 1
        if i % 2 == 0 then return nil end
        if i == 3 then return false end
        return m[0]:upper()
      end)
      assert.equal("Abcd", s)
      assert.equal(4, n)
    end)

    it("accepts numbers from the function", function()
      assert.equal("1-2", (re.gsub("a-b", "\\w", function(m)
        return m[0] == "a" and 1 or 2
      end)))
    end)

    it("survives reuse of the same regex inside the callback", function()
      local r = assert(re.compile("(\\d)"))
      local s = r:gsub("1 2 3", function(m)
        local inner = r:match("x9")
        local parts = r:split("a5b")
        return m[1] .. inner[1] .. #parts
      end)
      assert.equal("193 293 393", s)
    end)

    it("raises on a bad replacement type", function()
      assert.has_error(function() re.gsub("a", "a", {}) end)
      assert.has_error(function() re.gsub("a", "a", nil) end)
      assert.has_error(function()
        re.gsub("a", "a", function() return {} end)
      end, "invalid replacement value (a table)")
    end)

    it("propagates errors raised by the callback", function()
      assert.has_error(function()
        re.gsub("a", "a", function() error("boom", 0) end)
      end, "boom")
    end)
  end)

  describe("split", function()
    -- { subject, pattern, flags, limit, expected pieces }
    local cases = {
      { "a,b,c,d", ",", nil, nil, { "a", "b", "c", "d" } },
      { "a,b,,c", ",", nil, nil, { "a", "b", "", "c" } },
      { ",a,", ",", nil, nil, { "", "a", "" } },
      { "a, b ,c", "\\s*,\\s*", nil, nil, { "a", "b", "c" } },
      { "abc", "", nil, nil, { "a", "b", "c" } },
      { "héé", "", nil, nil, { "h", "é", "é" } },
      { "a1b2c", "(\\d)", nil, nil, { "a", "1", "b", "2", "c" } },
      { "a1b", "(\\d)(x)?", nil, nil, { "a", "1", false, "b" } },
      { "a,b,c,d", ",", nil, 3, { "a", "b", "c,d" } },
      { "a,b,c,d", ",", nil, 1, { "a,b,c,d" } },
      { "a,b,c,d", ",", nil, 0, { "a", "b", "c", "d" } },
      { "a,b,c,d", ",", nil, -1, { "a", "b", "c", "d" } },
      { "abc", "x", nil, nil, { "abc" } },
      { "", ",", nil, nil, {} },
      { "aXbxc", "x", "i", nil, { "a", "b", "c" } },
    }
    for i, c in ipairs(cases) do
      it(("case %d: %s ~ %s"):format(i, fmt(c[1]), fmt(c[2])), function()
        assert.same(c[5], re.split(c[1], c[2], c[3], c[4]))
      end)
    end
  end)

  describe("UTF-8", function()
    -- { function, subject, offset of the bad byte }
    local cases = {
      { re.match, "abc\xff", 3 },
      { re.find, "\xc3", 0 },
      { re.match, "ok \xe2\x82", 3 },
      { re.split, "a,\xc0\xaf", 2 },
    }
    for i, c in ipairs(cases) do
      it(("rejects invalid subject %d"):format(i), function()
        local r = pack(c[1](c[2], "z"))
        assert.equal(3, r.n)
        assert_fail(("^EREGEX: invalid UTF%%-8 in subject at offset %d$")
                    :format(c[3]), r[1], r[2], r[3])
      end)
    end

    it("rejects invalid subjects in gsub before replacing", function()
      assert_fail("^EREGEX: invalid UTF%-8 in subject at offset 1$",
                  re.gsub("a\xffa", "a", "b"))
    end)

    it("accepts any bytes in bytes mode", function()
      assert.equal("bb\xffbb", (re.gsub("aa\xffaa", "a", "b", "b")))
    end)

    it("rejects an init inside a character", function()
      assert_fail("^EREGEX: start position 3 is inside a UTF%-8 character$",
                  re.match("hé", "x", nil, 3))
    end)
  end)

  describe("compile", function()
    it("returns a regex object with methods", function()
      local r = assert(re.compile("(?<k>\\w+)=(?<v>\\w+)|(x)"))
      assert.equal("(?<k>\\w+)=(?<v>\\w+)|(x)", r:pattern())
      assert.equal(3, r:groups())
      assert.same({ "k", "v" }, r:names())
      assert.equal("ludo.regex: (?<k>\\w+)=(?<v>\\w+)|(x)", tostring(r))
      assert.same({ [0] = "a=b", "a", "b", false, k = "a", v = "b" },
                  r:match("-- a=b"))
      assert.is_nil(r:match("a=b", 2 + 3))
      assert.same({ 4, 6, "a", "b", false }, { r:find("-- a=b") })
      assert.same({ "1", "3" }, (function()
        local t = {}
        for m in r:gmatch("1=2 3=4") do t[#t + 1] = m.k end
        return t
      end)())
      assert.same({ "2=1 4=3", 2 }, { r:gsub("1=2 3=4", "${v}=${k}") })
      assert.same({ "2=1 3=4", 1 }, { r:sub("1=2 3=4", "$2=$1") })
      assert.same({ "", "a", "b", false, ";" }, r:split("a=b;", 2))
    end)

    it("lists each name once, in group order", function()
      local r = assert(re.compile("(?J)(?<z>a)|(?<b>c)(?<z>d)"))
      assert.same({ "z", "b" }, r:names())
      assert.same({}, assert(re.compile("(a)")):names())
    end)

    it("shares one object per pattern and flags through the cache", function()
      local a = assert(re.compile("x+"))
      assert.equal(a, re.compile("x+"))
      assert.equal(a, re.compile("x+", "u"))
      assert.equal(a, re.compile("x+", "oj"))
      assert.are_not.equal(a, re.compile("x+", "i"))
      assert.are_not.equal(a, re.compile("x+", "b"))
    end)

    it("keeps hot patterns across evictions", function()
      local hot = assert(re.compile("hot"))
      for i = 1, 300 do
        assert(re.compile("cold" .. i))
        assert.equal(hot, re.compile("hot"))
      end
      for i = 1, 300 do
        assert.equal("cold" .. i, re.match("cold" .. i, "cold" .. i)[0])
      end
    end)

    it("checks self", function()
      local r = assert(re.compile("a"))
      assert.has_error(function() r.match("a", "a") end)
      assert.has_error(function() r.groups({}) end)
    end)

    it("hides the metatable", function()
      assert.equal("ludo.regex", getmetatable(assert(re.compile("a"))))
    end)

    it("is collected", function()
      local weak = setmetatable({}, { __mode = "v" })
      for i = 1, 200 do weak[i] = re.compile("gc" .. i) end
      collectgarbage()
      collectgarbage()
      local alive = 0
      for _ in pairs(weak) do alive = alive + 1 end
      assert.is_true(alive <= 64)
    end)
  end)

  describe("escape", function()
    local cases = {
      "a.b*c", "(x)[y]{z}", "$^|?+\\", "tab\there", "new\nline",
      "# not a comment", "héllo wörld", "nul\0byte", "-/", "",
    }
    for i, s in ipairs(cases) do
      it(("round-trips case %d"):format(i), function()
        for _, flags in ipairs({ "", "x", "i", "xs" }) do
          local m = re.match(s, "^" .. re.escape(s) .. "$", flags)
          assert.same({ [0] = s }, m)
        end
      end)
    end

    it("leaves word characters alone", function()
      assert.equal("abc_019\\.", re.escape("abc_019."))
    end)
  end)

  describe("limits", function()
    local saved
    before_each(function() saved = re.limits() end)
    after_each(function() re.limits(saved) end)

    it("has defaults", function()
      assert.same({ match = 10000000, depth = 1000000,
                    heap = 32 * 1024 * 1024 }, re.limits())
    end)

    it("stops catastrophic backtracking quickly", function()
      local subject = string.rep("a", 64) .. "!"
      for _, p in ipairs({ "(a+)+$", "(*NO_JIT)(a+)+$", "(a|a)*$",
                           "(\\w+\\s?)+$" }) do
        local t0 = os.clock()
        local r = pack(re.match(subject, p))
        assert.equal(3, r.n)
        assert_fail("^EREGEX: match limit exceeded %(10000000, see " ..
                    "re.limits%)$", r[1], r[2], r[3])
        assert.is_true(os.clock() - t0 < 5)
      end
    end)

    it("reports the limit from every entry point", function()
      re.limits({ match = 1000 })
      local s, p = string.rep("a", 30) .. "!", "(a+)+$"
      local fail = "^EREGEX: match limit exceeded %(1000, see re.limits%)$"
      assert_fail(fail, re.match(s, p))
      assert_fail(fail, re.find(s, p))
      assert_fail(fail, re.gsub(s, p, ""))
      assert_fail(fail, re.sub(s, p, ""))
      assert_fail(fail, re.split(s, p))
      assert_fail(fail, re.gmatch(s, p)())
    end)

    it("applies depth and heap limits to the interpreter", function()
      local subject = string.rep("ab", 20000)
      re.limits({ depth = 100 })
      assert_fail("^EREGEX: depth limit exceeded %(100, see re.limits%)$",
                  re.match(subject, "(*NO_JIT)^(?:a|b)*$"))
      re.limits({ depth = 1000000, heap = 4096 })
      assert_fail("^EREGEX: heap limit exceeded %(4096 bytes, see " ..
                  "re.limits%)$", re.match(subject, "(*NO_JIT)^(?:a|b)*$"))
    end)

    it("matches again once the limit is raised", function()
      local subject = string.rep("a", 200) .. "!"
      re.limits({ match = 100 })
      assert_fail("^EREGEX: match limit exceeded",
                  re.match(subject, "(*NO_JIT)(?:a|b)+!"))
      re.limits({ match = 10000000 })
      assert.equal(subject, re.match(subject, "(*NO_JIT)(?:a|b)+!")[0])
    end)

    it("sets and returns limits", function()
      assert.same({ match = 5000, depth = 300, heap = 1024 * 1024 },
                  re.limits({ match = 5000, depth = 300, heap = 1024 * 1024 }))
      assert.same({ match = 5000, depth = 300, heap = 1024 * 1024 },
                  re.limits())
      assert.equal(2048, re.limits({ heap = 1025 }).heap)
    end)

    -- Programmer errors raise.
    local bad = {
      { { match = 0 }, "match must be an integer in %[1, 10000000%]" },
      -- The defaults are ceilings: a session lowers them, never raises.
      { { match = 10000001 }, "match must be an integer in %[1, 10000000%]" },
      { { depth = 1000001 }, "depth must be an integer" },
      { { heap = 64 * 1024 * 1024 }, "heap must be an integer" },
      { { match = 1e9 }, "match must be an integer" },
      { { match = 1.5 }, "match must be an integer" },
      { { match = "x" }, "match must be an integer" },
      { { depth = -1 }, "depth must be an integer" },
      { { heap = 10 }, "heap must be an integer in %[1024, " },
      { { mtach = 1 }, "unknown limit 'mtach'" },
      { { 5 }, "unknown limit '1'" },
    }
    for i, c in ipairs(bad) do
      it(("rejects bad limits %d"):format(i), function()
        local ok, err = pcall(re.limits, c[1])
        assert.is_false(ok)
        assert.matches(c[2], err)
      end)
    end

    it("rejects a non-table", function()
      assert.has_error(function() re.limits(5) end)
    end)
  end)

  describe("argument checks", function()
    local cases = {
      { "match", function() re.match(nil, "a") end },
      { "match pattern", function() re.match("a", {}) end },
      { "match flags", function() re.match("a", "a", 5 > 4) end },
      { "match init", function() re.match("a", "a", nil, "x") end },
      { "find", function() re.find({}, "a") end },
      { "gmatch", function() re.gmatch("a") end },
      { "gsub", function() re.gsub("a", "a") end },
      { "sub", function() re.sub("a") end },
      { "split limit", function() re.split("a", ",", nil, "x") end },
      { "compile", function() re.compile() end },
      { "escape", function() re.escape() end },
      { "method self", function() re.compile("a").match({}, "a") end },
    }
    for _, c in ipairs(cases) do
      it("raises for " .. c[1], function()
        assert.has_error(c[2])
      end)
    end

    it("accepts numbers as subjects and patterns like string.find", function()
      assert.same({ [0] = "23" }, re.match(1234, 23))
    end)
  end)

  it("reports whether the JIT is in use", function()
    assert.is_boolean(re.jit)
  end)
end)
