-- examples/rubrics/code_grading.lua: grading code submissions with a
-- rubric tree whose parts are named:
--
--   Sequential{
--     {"syntax", Gate{compiles = Compiles()}},
--     {"enough", Gate({tests = PassesTests()}, 0.5)},
--     {"quality", WeightedSum({tests = PassesTests(), style = Style()},
--                             {tests = 0.7, style = 0.3})}}
--
-- A submission that does not compile scores 0; one passing under half of
-- the tests scores 0; otherwise the score is 0.7 * tests + 0.3 * style.
-- Submissions are Lua source defining `add(a, b)`; they run in an empty
-- environment (no globals), which is enough for this fake grader.
--
-- Run from the repository root:
--   LUA_PATH='lua/?.lua;lua/?/init.lua;./?.lua;;' \
--     lua5.4 examples/rubrics/code_grading.lua
local R = require("ludo.rubrics")

-- 1.0 when the code loads (is syntactically valid Lua), else 0.0.
local Compiles = R.Rubric:extend("Compiles")
function Compiles:forward(action)
  return load(action.code, "=submission", "t", {}) and 1.0 or 0.0
end

-- The fraction of test cases `add` gets right.
local PassesTests = R.Rubric:extend("PassesTests")
function PassesTests:init(cases) self.cases = cases end
function PassesTests:forward(action)
  local env = {}
  local chunk = load(action.code, "=submission", "t", env)
  if not chunk or not pcall(chunk) or type(env.add) ~= "function" then
    return 0.0
  end
  local passed = 0
  for _, c in ipairs(self.cases) do
    local ok, got = pcall(env.add, c[1], c[2])
    if ok and got == c[3] then passed = passed + 1 end
  end
  return passed / #self.cases
end

-- Style: a third each for short lines, no tabs, and `local function`.
local Style = R.Rubric:extend("Style")
function Style:forward(action)
  local code, score = action.code, 0.0
  local long = false
  for line in (code .. "\n"):gmatch("([^\n]*)\n") do
    if #line > 80 then long = true end
  end
  if not long then score = score + 1 / 3 end
  if not code:find("\t") then score = score + 1 / 3 end
  if code:find("local function") then score = score + 1 / 3 end
  return score
end

local CASES = { { 1, 2, 3 }, { -1, 1, 0 }, { 10, 5, 15 }, { 0, 0, 0 } }

-- Sequential runs its children in order, so they are {name, rubric}
-- records; WeightedSum's children are a map (kept in sorted name order:
-- style, tests) with a map of weights.
local grader = R.Sequential {
  { "syntax", R.Gate { compiles = Compiles() } },
  { "enough", R.Gate({ tests = PassesTests(CASES) }, 0.5) },
  { "quality", R.WeightedSum({ tests = PassesTests(CASES), style = Style() },
    { tests = 0.7, style = 0.3 }) },
}

-- Each submission defines the global `add` in its own environment.
local submissions = {
  { name = "clean", code = "local function impl(a, b) return a + b end\n"
    .. "add = impl" },
  { name = "tabs", code = "function add(a, b)\n\treturn a + b\nend" },
  { name = "half", code = "local function f(a, b)\n"
    .. "  return a + b + (b > 1 and 1 or 0)\nend\nadd = f" },
  { name = "wrong", code = "function add(a, b) return a - b end" },
  { name = "syntax", code = "function add(a, b) return a + end" },
}

for _, s in ipairs(submissions) do
  local score = grader({ code = s.code }, { done = true })
  local parts = {}
  for name, r in grader:named_rubrics() do
    local v = r.last_score
    parts[#parts + 1] = name .. "=" .. (v and ("%.2f"):format(v) or "-")
  end
  print(("code_grading %-6s score=%.3f  %s"):format(s.name, score,
    table.concat(parts, " ")))
  grader:reset()
end
