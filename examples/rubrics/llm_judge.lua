-- examples/rubrics/llm_judge.lua: LLMJudge with canned, deterministic
-- clients (no network).
--
-- 1. A client that answers at once: the judge fills the prompt, reads the
--    first number of the answer and clamps it to [0, 1].
-- 2. Clients that wait (they call ludo.async.await inside, as the
--    runtime's HTTP client does): under async.run's virtual clock, a
--    WeightedSum of judges waiting 1 s and 3 s finishes at 3 s (they run
--    concurrently); a Sequential of the same finishes at 4 s.
--
-- Run from the repository root:
--   LUA_PATH='lua/?.lua;lua/?/init.lua;./?.lua;;' \
--     lua5.4 examples/rubrics/llm_judge.lua
local R = require("ludo.rubrics")
local async = require("ludo.async")

-- Answers by looking for the expected answer in the prompt.
local canned = {}
function canned:complete(prompt) -- luacheck: ignore 212
  if prompt:find("Paris", 1, true) then return "Score: 0.9 (correct)" end
  if prompt:find("Lyon", 1, true) then return "Score: 0.2" end
  return "I cannot judge this."
end

local judge = R.LLMJudge {
  prompt_template = "Question: {observation}\nAnswer: {action}\n"
    .. "Rate the answer from 0 to 1.",
  client = canned,
  default_score = 0.0,
}

local question = { question = "What is the capital of France?" }
for _, answer in ipairs({ "Paris", { text = "Lyon" }, "Berlin?" }) do
  local score = judge(answer, question)
  print(("llm_judge direct answer=%-16s score=%.2f"):format(
    type(answer) == "table" and answer.text or answer, score))
end
print("llm_judge prompt: " .. judge:prompt({ text = "Lyon" }, question)
  :gsub("\n", " | "))

-- A client that takes `delay` virtual seconds to answer `text`.
local function slow_client(text, delay)
  return {
    complete = function()
      return async.await(async.deferred(delay, text))
    end,
  }
end

local function judges()
  return R.LLMJudge { prompt_template = "{action}",
      client = slow_client("0.8", 1) },
    R.LLMJudge { prompt_template = "{action}",
      client = slow_client("0.6", 3) }
end

for _, kind in ipairs({ "WeightedSum", "Sequential" }) do
  local a, b = judges()
  local tree = kind == "WeightedSum" and R.WeightedSum({ a, b }, { 0.5, 0.5 })
    or R.Sequential(a, b)
  local clock = {}
  local score = async.run(function() return tree("answer", {}) end, clock)
  print(("llm_judge %-11s score=%.2f virtual_time=%gs"):format(kind, score,
    clock.now))
end
