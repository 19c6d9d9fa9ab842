-- The run file of the evaluation example (examples/eval/README.md): the
-- trivia environment's test split, three attempts per question (pass@1 and
-- pass@3), answered by an LLM policy and scored by the environment's rubric
-- (exact match + an LLM judge). `ludo eval examples/eval/run.lua` runs it;
-- examples/eval/run.sh starts the mock LLM server first.
--
-- The policy's model is reached at $LUDO_POLICY_URL (base_url_env); its
-- key, if the server wants one, is read from $LUDO_POLICY_KEY: a run file
-- names the variable, never the key.
local SYSTEM = "You answer trivia questions. Reply with two lines:\n"
  .. "ANSWER: <the answer, a few words at most>\n"
  .. "WHY: <one sentence explaining it>"

return {
  name = "trivia-mock",
  description = "Trivia test split, LLM policy and LLM judge (mock server)",
  env = "examples/eval/trivia",
  tasks = { split = "test" },
  repeats = 3,
  pass_k = { 1, 3 },
  seed = 7,
  concurrency = 8,
  max_steps = 1,
  out = "build/eval-example",

  policy = {
    llm = {
      api = "openai",
      base_url_env = "LUDO_POLICY_URL",
      base_url = "http://127.0.0.1:8089/v1",
      model = "policy",
      api_key_env = "LUDO_POLICY_KEY",
      temperature = 0.7,
      max_tokens = 64,
      retries = 3,
    },
    -- observation, history -> the chat messages of this turn.
    prompt = function(observation)
      return {
        { role = "system", content = SYSTEM },
        { role = "user", content = "Question: " .. observation.question },
      }
    end,
    -- The model's text -> the environment's action; an error makes the
    -- turn an invalid action (recorded with the text, not fatal).
    parse = function(text)
      local answer = text:match("ANSWER:%s*([^\n]-)%s*\n") or
        text:match("ANSWER:%s*([^\n]-)%s*$")
      if answer == nil or answer == "" then
        error("no 'ANSWER:' line in the reply", 0)
      end
      return { answer = answer,
        explanation = text:match("WHY:%s*([^\n]+)") or "" }
    end,
  },

  -- An episode succeeds when the answer was right (the "correct" rubric),
  -- whatever the judge thought of the explanation.
  success = function(result)
    return (result.rubrics.correct or 0) > 0
  end,
}
