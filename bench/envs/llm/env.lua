-- bench-llm (bench/llm_bench.c): step({base_url, n}) makes n chat calls
-- one after the other through ludo.llm, against the mock LLM server; the
-- bench steps 1,000 sessions at once, so 1,000 requests are in flight.
local env = {
  name = "llm_bench",
  action = { base_url = "string", n = "number", concurrency = "number" },
}

function env.reset() return { ready = true } end

function env.step(a)
  local c = require("ludo.llm").client {
    api = "openai", base_url = a.base_url, model = "bench",
    max_concurrency = a.concurrency, retries = 0, timeout_ms = 120000,
  }
  local msgs = { { role = "user", content = "hello" } }
  local fails, err = 0, nil
  for _ = 1, a.n do
    local text, e = c:chat(msgs)
    if text == nil then fails, err = fails + 1, e end
  end
  return { fails = fails, err = err }
end

return env
