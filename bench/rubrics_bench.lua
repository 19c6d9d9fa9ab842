-- bench/rubrics_bench.lua: evaluations per second of rubric trees against
-- the same arithmetic written as plain Lua functions.
--
-- Run from the repository root (stock lua5.4, no C modules):
--   lua5.4 bench/rubrics_bench.lua [scale]
-- `scale` (default 1) multiplies the fixed iteration counts.
--
-- Cases, each with inputs prebuilt once and built fresh per evaluation:
--   ws3      WeightedSum of 3 leaf rubrics;
--   seq      Sequential(Gate(leaf), WeightedSum(3 leaves));
--   ed100    ExponentialDiscounting over a T=100 episode: one evaluation is
--            a whole episode (100 calls, compute_step_rewards, reset);
--   sed100   the same with the streaming (O(1) memory) form.
-- The baseline of each case computes the same scores with plain functions
-- (for ed100: keeps the steps in an array, no copying). Each line prints
-- rubric and baseline evals/s, their ratio (rubric/baseline) and the
-- machinery's cost per evaluation in microseconds. Timing uses os.clock.
package.path = "lua/?.lua;lua/?/init.lua;./?.lua;" .. package.path

local R = require("ludo.rubrics")

local clock = os.clock
local scale = tonumber(arg and arg[1]) or 1

-- Leaf scores, shared by the rubrics and the baseline.
local function f1(a) return a.x * 0.5 end
local function f2(_, o) return o.y > 0 and 1.0 or 0.0 end
local function f3(a, o) return (a.x + o.y) * 0.25 end

local function leaf(name, f)
  local cls = R.Rubric:extend(name)
  function cls:forward(a, o) return f(a, o) end -- luacheck: ignore 212
  return cls()
end

local W1, W2, W3 = 0.2, 0.3, 0.5

local function ws3()
  return R.WeightedSum({ leaf("L1", f1), leaf("L2", f2), leaf("L3", f3) },
    { W1, W2, W3 })
end

local function base_ws3(a, o)
  return 0.0 + f1(a, o) * W1 + f2(a, o) * W2 + f3(a, o) * W3
end

local function seq()
  return R.Sequential(R.Gate(leaf("G", f1)), ws3())
end

local function base_seq(a, o)
  local g = f1(a, o)
  if g < 1.0 then g = 0.0 end
  if g == 0 then return 0.0 end
  return base_ws3(a, o)
end

local T, GAMMA = 100, 0.99

local Outcome = R.ExponentialDiscountingTrajectoryRubric:extend("Outcome")
function Outcome:score_trajectory(traj) -- luacheck: ignore 212
  return traj[#traj].observation.result
end

local SOutcome = R.StreamingExponentialDiscountingRubric:extend("SOutcome")
function SOutcome:fold(_, _, o) return o.result end -- luacheck: ignore 212
function SOutcome:finish(result) return result end -- luacheck: ignore 212

local function episode_rubric(r, actions, observations)
  for t = 1, T do r(actions[t], observations[t]) end
  local rewards = r:compute_step_rewards()
  r:reset()
  return rewards[1]
end

local function episode_base(actions, observations)
  local traj = {}
  for t = 1, T do
    traj[t] = { action = actions[t], observation = observations[t] }
  end
  local R0 = traj[T].observation.result
  local rewards = {}
  for t = 0, T - 1 do rewards[t + 1] = R0 * GAMMA ^ (T - 1 - t) end
  return rewards[1]
end

local function make_episode()
  local actions, observations = {}, {}
  for t = 1, T do
    actions[t] = { move = t }
    observations[t] = { done = t == T, result = t == T and 1.0 or nil }
  end
  return actions, observations
end

local function time(n, fn)
  -- Runs fn n times; returns evals/s and the checksum of the results.
  fn()
  collectgarbage("collect")
  local sum = 0.0
  local t0 = clock()
  for _ = 1, n do sum = sum + fn() end
  local dt = clock() - t0
  return n / dt, sum
end

local function report(name, inputs, n, rubric_fn, base_fn)
  local rate, s1 = time(n, rubric_fn)
  local brate, s2 = time(n, base_fn)
  if math.abs(s1 - s2) > 1e-9 * math.max(1, math.abs(s2)) then
    error(("%s: rubric and baseline disagree: %.17g vs %.17g"):format(name,
      s1, s2))
  end
  print(("%-7s %-8s rubric %10.0f evals/s  baseline %11.0f evals/s  "
    .. "ratio %.3f  overhead %.3f us/eval"):format(name, inputs, rate, brate,
    rate / brate, (1 / rate - 1 / brate) * 1e6))
end

local N = 500000 * scale
local NE = 1500 * scale

do
  local r, a, o = ws3(), { x = 2 }, { y = 1, done = false }
  report("ws3", "prebuilt", N, function() return r(a, o) end,
    function() return base_ws3(a, o) end)
  report("ws3", "fresh", N,
    function() return r({ x = 2 }, { y = 1, done = false }) end,
    function() return base_ws3({ x = 2 }, { y = 1, done = false }) end)
end

do
  local r, a, o = seq(), { x = 2 }, { y = 1, done = false }
  report("seq", "prebuilt", N, function() return r(a, o) end,
    function() return base_seq(a, o) end)
  report("seq", "fresh", N,
    function() return r({ x = 2 }, { y = 1, done = false }) end,
    function() return base_seq({ x = 2 }, { y = 1, done = false }) end)
end

for _, case in ipairs({ { "ed100", Outcome }, { "sed100", SOutcome } }) do
  local r = case[2] { gamma = GAMMA }
  local actions, observations = make_episode()
  report(case[1], "prebuilt", NE,
    function() return episode_rubric(r, actions, observations) end,
    function() return episode_base(actions, observations) end)
  report(case[1], "fresh", NE,
    function() return episode_rubric(r, make_episode()) end,
    function() return episode_base(make_episode()) end)
end
