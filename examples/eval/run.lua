-- examples/eval: an LLM policy answers the trivia questions (3 tries
-- each, for pass@k), an LLM judge scores the answers inside the sessions;
-- both LLMs are the mock server of spec/llm, reached at $LUDO_POLICY_URL
-- and $LUDO_JUDGE_URL (run.sh sets them; base_url is the fallback). With
-- a real server, set those (and name the key's variable with api_key_env).
return {
  env = "trivia",
  tasks = { split = "test" },
  repeats = 3,
  pass_k = { 1, 3 },
  concurrency = 8,
  max_steps = 2,
  seed = 1,
  policy = {
    llm = { api = "openai", base_url_env = "LUDO_POLICY_URL",
            base_url = "http://127.0.0.1:8089/v1",
            model = "answerer", temperature = 0.7, max_tokens = 32 },
    prompt = function(observation, history)
      local messages = { { role = "system",
        content = "Answer with a few words, no sentence." } }
      -- A try after a refused one says so before the question (so the
      -- mock's rules tell tries apart by their text, in any order).
      local note = ""
      for _, h in ipairs(history) do
        messages[#messages + 1] = { role = "user",
          content = note .. h.observation.question }
        messages[#messages + 1] = { role = "assistant", content = h.text }
        note = h.error and ("That was not an answer (" .. h.error .. "). ")
          or ""
      end
      messages[#messages + 1] = { role = "user",
        content = note .. observation.question }
      return messages
    end,
    parse = function(text)
      local answer = text:match("^%s*(.-)%s*$")
      if answer == "" or #answer > 40 or answer:find("not sure", 1, true) then
        error("not a short answer: " .. text, 0)
      end
      return { answer = answer }
    end,
  },
  success = function(result) return result.reward >= 0.9 end,
}
