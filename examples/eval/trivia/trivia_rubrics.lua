-- The trivia environment's rubrics: the answer matches the expected one
-- (case and surrounding spaces aside), and an LLM judge's rating of the
-- explanation. The keys name the parts in metadata.rubrics (and so in the
-- per-rubric columns of `ludo eval`'s results): "correct" and "judge".
local R = require("ludo.rubrics")

local M = {}

M.Correct = R.Rubric:extend("Correct")
function M.Correct:forward(action, observation) -- luacheck: ignore 212
  local want = observation.expected or ""
  local got = action.answer:lower():match("^%s*(.-)%s*$")
  return got == want:lower() and 1.0 or 0.0
end

-- The judge's client: a ludo.llm client built on first use, so that
-- loading the environment needs no network and no LLM permission.
local function judge_client()
  local llm = require("ludo.llm")
  return llm.client {
    api = "openai",
    base_url_env = "LUDO_JUDGE_URL",
    base_url = "http://127.0.0.1:8089/v1",
    model = "judge",
    api_key_env = "LUDO_JUDGE_KEY",
    temperature = 0,
    max_tokens = 16,
  }
end

local Lazy = {}
function Lazy:complete(prompt, opts)
  self.client = self.client or judge_client()
  return self.client:complete(prompt, opts)
end

function M.new()
  local judge = R.LLMJudge {
    prompt_template = "You grade explanations of trivia answers.\n"
      .. "Question and expected answer: {observation}\n"
      .. "Agent's answer: {action}\n"
      .. "Rate the explanation from 0 to 1. Reply with the number only.",
    client = setmetatable({}, { __index = Lazy }),
    default_score = 0.0,
    normalize = true,
  }
  return R.WeightedSum({ correct = M.Correct(), judge = judge },
    { correct = 0.7, judge = 0.3 })
end

return M
