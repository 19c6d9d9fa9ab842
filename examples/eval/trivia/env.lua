-- The trivia environment of examples/eval: one question per episode from
-- its test split, answered in one step, scored by a rubric tree of an
-- exact match against the reference answer and an LLM judge (LLMJudge with
-- a ludo.llm client, rubrics/llm_judge.lua) rating the answer. The judge's
-- server is $LUDO_JUDGE_URL (run.sh starts the mock of spec/llm there).
local R = require("ludo.rubrics")
local LLMJudge = require("rubrics.llm_judge")

local QUESTIONS = {
  { "What is the capital of France?", "Paris" },
  { "What is 2 + 2?", "4" },
  { "Which is the largest planet of the solar system?", "Jupiter" },
  { "What colour is a clear daytime sky?", "blue" },
  { "Who wrote Hamlet?", "Shakespeare" },
}

local question, current -- this episode's question and reference answer

local Exact = R.Rubric:extend("Exact")
function Exact:forward(action)
  return action.answer:lower() == current:lower() and 1.0 or 0.0
end

local env = {
  name = "trivia",
  description = "Trivia questions; an exact match and an LLM judge score "
    .. "the answer.",
  concurrent = true,
  action = { answer = "string" },
  observation = { question = "string", expected = "string?" },
  -- The keys name the rubrics in metadata.rubrics, and so in the results'
  -- per-rubric columns and the report: "exact" and "judge".
  rubric = R.WeightedSum({
    exact = Exact(),
    judge = LLMJudge{
      prompt_template = "Rate from 0 to 1 how well the answer {action} "
        .. "answers {observation}. Reply with the number only.",
      llm = { api = "openai", base_url_env = "LUDO_JUDGE_URL",
              base_url = "http://127.0.0.1:8089/v1",
              model = "judge", temperature = 0, max_tokens = 8 },
      normalize = true,
    },
  }, { exact = 0.5, judge = 0.5 }),
  tasks = {
    splits = { "test" },
    count = function() return #QUESTIONS end,
    get = function(_, i)
      local q = QUESTIONS[i + 1]
      return q and { id = "q" .. i, question = q[1] } or nil
    end,
  },
}

function env.reset(opts)
  local i = opts.task and opts.task.id and tonumber(opts.task.id:sub(2)) or 0
  question, current = QUESTIONS[i + 1][1], QUESTIONS[i + 1][2]
  return { question = question }
end

-- One answer per episode; the observation that ends it shows the
-- question again with the reference answer (the trajectory reads well).
function env.step()
  return { question = question, expected = current, done = true }
end

return env
