-- spec/unit/pattern_spec.lua: the sandbox's string.find/match/gmatch/gsub
-- (runtime/script/pattern.c) against the stock library of the Lua running
-- busted, over generated patterns aimed at the lead (a first class
-- compiled to a byte set, which skips start positions or matches alone)
-- and at the general matcher it must agree with: results, captures,
-- replaced strings and error messages, case by case. (That a long scan
-- ends at the CPU budget is spec/c/test-abuse.c's: a subject long enough
-- to outlast the budget takes longer to build than to scan.)
local host = require("ludo.host")
local json = require("ludo.json")

-- The environment: each step runs a chunk of cases (Lua source, hex in
-- the JSON) with the sandbox's functions and returns what each gave.
local ENV = [=[
local function unhex(h)
  local out = {}
  for i = 1, #h, 2 do
    out[#out + 1] = string.char(tonumber(h:sub(i, i + 1), 16))
  end
  return table.concat(out)
end
local function hex(s)
  local out = {}
  for i = 1, #s do out[i] = string.format("%02x", s:byte(i)) end
  return table.concat(out)
end
local big
return {
  name = "pattern_spec",
  step = function(action)
    if action.big then
      big = big or string.rep("a", action.big)
      if action.scan then return { at = tostring(big:find("[b]")) } end
      return { built = #big }
    end
    local run = assert(load(unhex(action.cases), "cases", "t"))()
    local out = run(string)
    for i = 1, #out do out[i] = hex(out[i]) end
    return { out = out }
  end,
}
]=]

-- Runs the cases with the functions of `lib`; returns one string a case.
-- The same source runs in the sandbox (its string) and here (stock).
local RUNNER = [=[
local cases = %s
return function(lib)
  local repls = {
    f1 = function(a, b) return b or a end,
    f2 = function() return false end,
    f3 = function(a) return a == "a" and 1 or nil end,
    t = { a = "A", b = false, ["("] = 1, ["\0"] = "Z" },
  }
  local function norm(v)
    if type(v) == "string" then return (v:gsub("to '[^']*'", "to '?'")) end
    return v
  end
  local function run(fn, ...)
    local r = table.pack(pcall(fn, ...))
    local out = {}
    for i = 1, r.n do out[i] = tostring(norm(r[i])) end
    return r.n .. ":" .. table.concat(out, "|")
  end
  local function collect(s, p, init)
    local out, n = {}, 0
    for a, b, c in lib.gmatch(s, p, init) do
      n = n + 1
      out[n] = tostring(a) .. "," .. tostring(b) .. "," .. tostring(c)
      if n == 40 then break end
    end
    return table.concat(out, ";")
  end
  local lines = {}
  for i, c in ipairs(cases) do
    local what, s, p, a, b = c[1], c[2], c[3], c[4], c[5]
    local r
    if what == "find" then r = run(lib.find, s, p, a, b)
    elseif what == "match" then r = run(lib.match, s, p, a)
    elseif what == "gmatch" then r = run(collect, s, p, a)
    else r = run(lib.gsub, s, p, repls[a] or a, b) end
    lines[i] = r
  end
  return lines
end
]=]

local function hex(s)
  local out = {}
  for i = 1, #s do out[i] = ("%02x"):format(s:byte(i)) end
  return table.concat(out)
end
local function unhex(h)
  return (h:gsub("%x%x", function(x) return string.char(tonumber(x, 16)) end))
end

-- Lua source for a value of a case (strings with %q: '\0' and all bytes;
-- a table holds an expression, for long subjects).
local function lit(v)
  if type(v) == "string" then return ("%q"):format(v) end
  if type(v) == "table" then return v.expr end
  return tostring(v)
end

-- --- the generator -----------------------------------------------------

local ITEMS = {
  ".", "a", "b", "\0", "\255", " ", "-", "]", "^", "*", "$",
  "%a", "%A", "%d", "%D", "%s", "%S", "%w", "%W", "%p", "%P", "%l", "%u",
  "%c", "%g", "%x", "%X", "%z", "%Z", "%.", "%%", "%q", "%]", "%\0",
  "[ab]", "[^a]", "[a-c]", "[c-a]", "[%d]", "[]a]", "[^]]", "[]]", "[a-]",
  "[-a]", "[%a-z]", "[^%s%d]", "[\0-\31]", "[^\32-\126]", "[^%a%d_]",
  "[%]]", "[a%-z]", "[\0]", "[^\0]", "[\128-\255]", "[%w_.-]", "[]-a]",
  "[^]-a]", "[A-Z%d]",
  -- malformed or not a class: the lead must leave these alone
  "[", "[a", "[^", "[]", "[^]", "[%", "%", "[a%", "%b()", "%b", "%f[%w]",
  "%f[^a]", "%fa", "%1", "%0", "(", ")", "()",
}
local QUANTS = { "", "", "", "+", "+", "*", "-", "?" }
local TAILS = { "", "", "", "", "x", "$", "%d", ")", "(", "%", "[a", "b+",
  "()", "(a)", "%1", "a-b", ".*", "[^a]+$", "%f[%a]" }
local OPENS = { "", "", "", "(", "()", "((", "(()" }
local CHARS = { "a", "a", "b", "c", "x", "A", "Q", "q", "1", "9", " ", "\t",
  "\n", "\0", "\0", "\31", "\127", "\128", "\200", "\255", "~", "-", "]",
  "[", "(", ")", "%", ".", "_", "^", "$" }
local INITS = { false, false, false, 1, 0, -1, -3, 2, 5, 20, -100 }
local REPLS = { "x", "%0", "%1", "%2", "%%", "<%1>", "%x", "", "%", 7,
  "f1", "f2", "f3", "t" }

local function pick(t) return t[math.random(#t)] end

local function subject()
  local n = math.random(10) == 1 and math.random(40, 200)
    or math.random(0, 12)
  local out = {}
  for i = 1, n do out[i] = pick(CHARS) end
  return table.concat(out)
end

local function pattern()
  local r = math.random(10)
  local parts = {}
  if r <= 3 then parts[1] = "^" end
  if r <= 8 then
    parts[#parts + 1] = pick(OPENS)
    parts[#parts + 1] = pick(ITEMS)
    parts[#parts + 1] = pick(QUANTS)
    parts[#parts + 1] = pick(TAILS)
  else
    for _ = 1, math.random(0, 5) do
      parts[#parts + 1] = pick(ITEMS) .. pick(QUANTS)
    end
  end
  return table.concat(parts)
end

-- pool: when given, patterns come from it, so calls in a row share one
-- (the per-state cache of the last pattern's lead is hit).
local function gen_case(pool)
  local s, p = subject(), pool and pick(pool) or pattern()
  local which = math.random(4)
  local init = pick(INITS) or nil
  if which == 1 then
    return { "find", s, p, init, math.random(6) == 1 or nil }
  elseif which == 2 then
    return { "match", s, p, init }
  elseif which == 3 then
    return { "gmatch", s, p, init }
  end
  return { "gsub", s, p, pick(REPLS), pick({ false, false, 0, 1, 2, -1 })
    or nil }
end

local function source(cases)
  local rows = {}
  for i, c in ipairs(cases) do
    rows[i] = "{" .. lit(c[1]) .. "," .. lit(c[2]) .. "," .. lit(c[3]) ..
      "," .. lit(c[4]) .. "," .. lit(c[5]) .. "}"
  end
  return RUNNER:format("{\n" .. table.concat(rows, ",\n") .. "\n}")
end

local function fmt(c)
  return ("%s(%s, %q, %s, %s)"):format(c[1], lit(c[2]), c[3],
    tostring(c[4]), tostring(c[5]))
end

describe("sandbox patterns", function()
  local dir, rt, s

  setup(function()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir))
    local f = assert(io.open(dir .. "/env.lua", "w"))
    f:write(ENV)
    f:close()
    rt = assert(host.runtime({ module_path = ".", prewarm = 0,
      memory_cap = 64 << 20, cpu_budget_ms = 20000 }))
    s = assert(assert(rt:load(dir)):open())
  end)

  teardown(function()
    if rt then rt:close() end
    os.remove(dir .. "/env.lua")
    os.remove(dir)
  end)

  -- Runs `cases` in the sandbox and here; asserts every case agrees.
  local function agree(cases)
    local src = source(cases)
    local out, err = s:step(json.encode({ cases = hex(src) }))
    assert.is_string(out, err)
    local got = json.decode(out).observation.out
    local want = assert(load(src, "cases", "t"))()(string)
    assert.are.equal(#cases, #got)
    for i, c in ipairs(cases) do
      assert.are.equal(want[i], unhex(got[i]), fmt(c))
    end
  end

  it("agrees with the library on hand-picked cases", function()
    agree({
      { "find", "hello", "[^\32-\126]" }, { "find", "h\0llo", "[^\32-\126]" },
      { "find", "", "[a" }, { "find", "", "%" }, { "match", "", "[]" },
      { "find", "abc", "[a", 10 }, { "gmatch", "abc", "[a", 10 },
      { "find", "xa", "a[b" }, { "find", "x", "a[b" },
      { "match", "key=val", "(%w+)=(%w+)" }, { "match", "  42 ", "%d+" },
      { "gsub", "a1b22c333", "%d+", "<%0>" }, { "gsub", "abc", "^[ab]", "X" },
      { "gsub", "a\0b\0", "%z", "0" }, { "gsub", "aaa", "[a]", "b", 2 },
      { "gmatch", "one two  three", "%a+" }, { "gmatch", "a,b,,c", "[^,]+" },
      { "find", "]]", "[]]" }, { "find", "a]", "[^]]" },
      { "find", "-", "[a-]" }, { "find", "Zz", "[%a-z]" },
      { "match", "THE (quick) fox", "%f[%a]%a+" }, { "find", "a$", "$" },
      { "find", "a$b", "$b" }, { "gmatch", "^a^", "^a" },
      { "match", "xyz", "()y()" }, { "find", "aab", "(a)%1" },
      { "match", "a", ("(a)"):rep(33) }, { "match", "b", ("(a)"):rep(33) },
      -- the cached lead of a pattern, then the same text used otherwise
      { "find", "x^a", "^a" }, { "gmatch", "x^a", "^a" },
      { "find", "x^a", "^a" }, { "gsub", "x^a^a", "^a", "-" },
      { "find", "x^a", "^a", 1, true }, { "find", "x^a", "a" },
      { "gsub", "aXa", "a", "b" }, { "find", "aXa", "a", 2 },
      { "find", "a.b", "." }, { "find", "a.b", ".", 1, true },
      { "find", "a.b", "." },
    })
  end)

  it("agrees with the library on 20,000 generated cases", function()
    math.randomseed(2718)
    for batch = 1, 10 do
      local cases, pool = {}, nil
      if batch % 2 == 0 then
        pool = {}
        for i = 1, 6 do pool[i] = pattern() end
        -- the same text anchored and not, and '^' that gmatch keeps
        pool[7] = "^" .. pool[1]
        pool[8] = pool[1]:gsub("^%^", "")
      end
      for i = 1, 2000 do cases[i] = gen_case(pool) end
      agree(cases)
    end
  end)

  -- The lead scans in chunks of 16,384 bytes (PATTERN_CHECK_UNITS),
  -- spending each before the next: matches on and around the seams.
  it("agrees with the library across the scan's chunks", function()
    for _, at in ipairs({ 1, 16383, 16384, 16385, 32768, 32769, 33000 }) do
      local subj = { expr = ("('a'):rep(%d) .. 'b' .. ('a'):rep(%d)")
        :format(at - 1, 33000 - at) }
      local cases = {}
      for _, p in ipairs({ "[b]", "[^a]", "b", "%l", "[b]a", "[a]+",
        "^[a]+", "(b)" }) do
        cases[#cases + 1] = { "find", subj, p }
        cases[#cases + 1] = { "match", subj, p, -17000 }
        cases[#cases + 1] = { "gmatch", subj, p .. "()", 16000 }
      end
      -- gsub's results are the subject's size: two are enough
      cases[#cases + 1] = { "gsub", subj, "[b]", "X" }
      cases[#cases + 1] = { "gsub", subj, "[a]+", "%0", 3 }
      agree(cases)
    end
  end)
end)
