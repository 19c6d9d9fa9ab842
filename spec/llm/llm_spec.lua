-- Functional specs of ludo.llm (runtime/net/lllm.c, llm.c, curlm.c;
-- docs/llm.md) against the mock LLM server (spec/llm/mock_llm.js), driven
-- through ludo.host with the fixture spec/fixtures/llm: both APIs, the
-- requests' headers and bodies, retries (5xx, 429 + Retry-After, dropped
-- connections), no retry on 400, timeouts, malformed and oversized
-- replies, the concurrency limit (the mock's max in flight), token
-- accounting, the API key never in any output, cancellation, the gate,
-- argument errors, LLMJudge with a ludo.llm client.
--
-- The key test needs LUDO_TEST_LLM_KEY in the environment (a stock lua5.4
-- cannot set one): scripts/test.sh sets it; by hand,
--   LUDO_TEST_LLM_KEY=sk-test-0123456789 busted --lua=lua5.4 \
--     --cpath=build/cmod/?.so spec/llm
-- Timing is asserted only as lower bounds the mock measured (a wait that
-- honours Retry-After: 1 cannot be shorter than a second).
local host = require("ludo.host")
local json = require("ludo.json")

local ROOT = os.getenv("LUDO_ROOT") or "."
local KEY_ENV = "LUDO_TEST_LLM_KEY"
local FIXTURE = "spec/fixtures/llm"

local function slurp(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function quote(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

-- The mock server, started for the whole file.
local mock = {}

function mock.start()
  local log = os.tmpname()
  local p = io.popen("node " .. quote(ROOT .. "/spec/llm/mock_llm.js")
    .. " >" .. log .. " 2>&1 & echo $!")
  mock.pid = p:read("l")
  p:close()
  for _ = 1, 500 do
    mock.port = slurp(log):match("listening on http://127%.0%.0%.1:(%d+)")
    if mock.port then break end
    os.execute("sleep 0.02")
  end
  os.remove(log)
  assert(mock.port, "the mock LLM server did not start")
  mock.base = "http://127.0.0.1:" .. mock.port .. "/v1"
end

function mock.stop()
  os.execute("kill " .. mock.pid .. " 2>/dev/null")
end

-- A control route of the mock: its decoded reply.
function mock.ctl(method, path, body)
  local p = io.popen("node " .. quote(ROOT .. "/spec/llm/mockctl.js") .. " "
    .. mock.port .. " " .. method .. " " .. path
    .. (body and (" " .. quote(json.encode(body))) or ""))
  local out = p:read("a")
  assert(p:close(), "mockctl failed: " .. out)
  return json.decode(out)
end

function mock.script(s)
  mock.ctl("POST", "/_mock/script", s)
  mock.ctl("POST", "/_mock/reset")
end

local function client_opts(extra)
  local c = { api = "openai", base_url = mock.base, model = "mock-1",
    backoff_ms = 1, max_backoff_ms = 5 }
  for k, v in pairs(extra or {}) do c[k] = v end
  return c
end

local function runtime(lua_llm)
  return assert(host.runtime({ module_path = ROOT, prewarm = 0,
    lua_llm = lua_llm == nil and 3 or lua_llm }))
end

-- Opens a session of the fixture on a new runtime.
local function session(lua_llm)
  local rt = runtime(lua_llm)
  local env = assert(rt:load(ROOT .. "/" .. FIXTURE))
  local s = assert(env:open())
  assert(s:reset())
  return s, rt
end

-- Runs op `a` in session s; returns the observation.
local function run(s, a)
  local out, err = s:step(json.encode({ json = json.encode(a) }))
  assert(out, err)
  return json.decode(out).observation
end

local function chat(s, client, messages, opts)
  return run(s, { op = "chat", client = client, messages = messages,
    opts = opts })
end

local function user(text) return { { role = "user", content = text } } end

describe("ludo.llm", function()
  setup(mock.start)
  teardown(mock.stop)

  describe("wire formats", function()
    it("speaks OpenAI chat completions", function()
      mock.script({ rules = { { match = "^hello", reply = "hi there" } } })
      local s, rt = session()
      local r = chat(s, client_opts({ temperature = 0.5, max_tokens = 7,
        stop = { "\n\n" } }), {
        { role = "system", content = "be brief" },
        { role = "user", content = "hello world" } })
      assert.are.equal("hi there", r.text)
      assert.are.equal(200, r.info.status)
      assert.are.equal("stop", r.info.finish_reason)
      assert.are.equal("openai", r.info.api)
      assert.are.equal(1, r.info.attempts)
      local req = mock.ctl("GET", "/_mock/requests")[1]
      assert.are.equal("/v1/chat/completions", req.path)
      assert.are.equal("application/json", req.headers["content-type"])
      assert.are.same({ model = "mock-1", temperature = 0.5, max_tokens = 7,
        stop = { "\n\n" }, messages = {
          { role = "system", content = "be brief" },
          { role = "user", content = "hello world" } } }, req.body)
      s:close()
      rt:close()
    end)

    it("speaks Anthropic Messages (system on top, max_tokens default)",
      function()
        mock.script({ default = "bonjour" })
        local s, rt = session()
        local r = chat(s, client_opts({ api = "anthropic",
          stop = { "END" } }), {
          { role = "system", content = "one" },
          { role = "system", content = "two" },
          { role = "user", content = "salut" } }, { temperature = 0 })
        assert.are.equal("bonjour", r.text)
        assert.are.equal("end_turn", r.info.finish_reason)
        assert.are.equal("anthropic", r.info.api)
        local req = mock.ctl("GET", "/_mock/requests")[1]
        assert.are.equal("/v1/messages", req.path)
        assert.are.equal("2023-06-01", req.headers["anthropic-version"])
        assert.are.same({ model = "mock-1", system = "one\n\ntwo",
          max_tokens = 1024, temperature = 0.0, stop_sequences = { "END" },
          messages = { { role = "user", content = "salut" } } }, req.body)
        s:close()
        rt:close()
      end)

    it("escapes any text into the request and reads it back", function()
      local text = 'q " bs \\ tab \t nl \n cr \r ctl \1\31 del \127 / '
        .. "\u{e9} \u{6f22} \u{1f600}"
      mock.script({ rules = { { echo = true } } })
      local s, rt = session()
      local r = chat(s, client_opts({ stop = { '"\\', "\n" } }), {
        { role = "system", content = text },
        { role = "user", content = text } })
      assert.are.equal(text, r.text)
      local req = mock.ctl("GET", "/_mock/requests")[1]
      assert.are.same({ { role = "system", content = text },
        { role = "user", content = text } }, req.body.messages)
      assert.are.same({ '"\\', "\n" }, req.body.stop)
      s:close()
      rt:close()
    end)

    it("reads replies as a JSON decoder does (the last of repeated keys)",
      function()
        mock.script({ rules = {
          { match = "1", body = '{"choices":[{"message":{"content":"old"}}],'
            .. '"choices":[{"message":{"role":"assistant","content":'
            .. '"a\\"\\u00e9\\ud83d\\ude00"},"finish_reason":"length"},'
            .. '{"message":{"content":"second"}}],"usage":{"prompt_tokens":'
            .. '3,"completion_tokens":2.0}}' },
          { match = "2", body = '{"choices":[{"message":{"content":null}}]}' },
          { match = "3", api = "anthropic", body = '{"content":[{"type":'
            .. '"text","text":"a"},{"type":"tool_use","text":"no"},{"text":'
            .. '"b"},{"type":"text","text":5},"x",{"type":"text","text":"c",'
            .. '"text":"d"}],"stop_reason":"end_turn","usage":'
            .. '{"input_tokens":4,"output_tokens":5}}' },
          { match = "4", body = '{"choices":[{"message":{"content":"x"}}],'
            .. '"choices":5}' } } })
        local s, rt = session()
        local r = chat(s, client_opts(), user("1"))
        assert.are.equal('a"\u{e9}\u{1f600}', r.text)
        assert.are.equal("length", r.info.finish_reason)
        assert.are.equal(3, r.info.prompt_tokens)
        assert.are.equal(0, r.info.completion_tokens) -- 2.0: not an integer
        -- null content (a refusal, a tool call) is no text: never "",
        -- which an LLM judge would score as a reply.
        r = chat(s, client_opts(), user("2"))
        assert.is_nil(r.text)
        assert.are.equal("ELLM: 200 malformed reply (choices[0].message."
          .. "content is null: no text, as in a refusal or a tool call)",
          r.err)
        r = chat(s, client_opts({ api = "anthropic" }), user("3"))
        assert.are.equal("abd", r.text)
        assert.are.equal("end_turn", r.info.finish_reason)
        assert.are.equal(4, r.info.prompt_tokens)
        assert.are.equal(5, r.info.completion_tokens)
        r = chat(s, client_opts(), user("4"))
        assert.are.equal("ELLM: 200 malformed reply (no "
          .. "choices[0].message.content)", r.err)
        s:close()
        rt:close()
      end)

    it("complete(prompt) sends one user message", function()
      mock.script({ rules = { { echo = true } } })
      local s, rt = session()
      local r = run(s, { op = "complete", client = client_opts(),
        prompt = "say this", opts = { max_tokens = 3 } })
      assert.are.equal("say this", r.text)
      local req = mock.ctl("GET", "/_mock/requests")[1]
      assert.are.same(user("say this"), req.body.messages)
      assert.are.equal(3, req.body.max_tokens)
      s:close()
      rt:close()
    end)
  end)

  describe("token accounting", function()
    it("reports usage per call and sums it per session", function()
      mock.script({ rules = {
        { match = "a", reply = "x", prompt_tokens = 11,
          completion_tokens = 5 },
        { match = "b", reply = "y", prompt_tokens = 20,
          completion_tokens = 1 } } })
      local s, rt = session()
      local r1 = chat(s, client_opts(), user("a"))
      local r2 = chat(s, client_opts({ api = "anthropic" }), user("b"))
      assert.are.equal(11, r1.info.prompt_tokens)
      assert.are.equal(5, r1.info.completion_tokens)
      assert.are.equal(20, r2.info.prompt_tokens)
      assert.are.equal(1, r2.info.completion_tokens)
      assert.is_true(r1.info.latency_ms > 0)
      local u = s:llm_usage()
      assert.are.equal(2, u.calls)
      assert.are.equal(0, u.failures)
      assert.are.equal(0, u.retries)
      assert.are.equal(31, u.prompt_tokens)
      assert.are.equal(6, u.completion_tokens)
      assert.is_true(u.latency_ms >= r1.info.latency_ms)
      s:close()
      rt:close()
    end)
  end)

  describe("retries", function()
    it("retries 5xx and succeeds", function()
      mock.script({ rules = { { status = 500, times = 2 },
        { reply = "finally" } } })
      local s, rt = session()
      local r = chat(s, client_opts(), user("x"))
      assert.are.equal("finally", r.text)
      assert.are.equal(3, r.info.attempts)
      assert.are.equal(3, mock.ctl("GET", "/_mock/stats").requests)
      local u = s:llm_usage()
      assert.are.equal(1, u.calls)
      assert.are.equal(2, u.retries)
      s:close()
      rt:close()
    end)

    it("honours Retry-After on 429", function()
      mock.script({ rules = { { status = 429, retry_after = "1",
        message = "slow down", times = 1 }, { reply = "ok now" } } })
      local s, rt = session()
      local r = chat(s, client_opts({ backoff_ms = 1 }), user("x"))
      assert.are.equal("ok now", r.text)
      assert.are.equal(2, r.info.attempts)
      local reqs = mock.ctl("GET", "/_mock/requests")
      assert.are.equal(2, #reqs)
      -- backoff_ms = 1 would retry at once; Retry-After says 1 s.
      assert.is_true(reqs[2].t_ms - reqs[1].t_ms >= 990,
        "retried after " .. (reqs[2].t_ms - reqs[1].t_ms) .. " ms")
      s:close()
      rt:close()
    end)

    it("caps Retry-After by max_retry_after_ms", function()
      mock.script({ rules = { { status = 429, retry_after = "3600",
        times = 1 }, { reply = "ok" } } })
      local s, rt = session()
      local r = chat(s, client_opts({ max_retry_after_ms = 10 }), user("x"))
      assert.are.equal("ok", r.text)
      assert.are.equal(2, r.info.attempts)
      s:close()
      rt:close()
    end)

    it("caps a Retry-After too large for a number, or a far date",
      function()
        local s, rt = session()
        for _, after in ipairs({ "99999999999999999999999",
          "Wed, 21 Oct 2099 07:28:00 GMT" }) do
          mock.script({ rules = { { status = 429, retry_after = after,
            times = 1 }, { reply = "ok" } } })
          local r = chat(s, client_opts({ max_retry_after_ms = 300 }),
            user("x"))
          assert.are.equal("ok", r.text)
          assert.are.equal(2, r.info.attempts)
          local reqs = mock.ctl("GET", "/_mock/requests")
          -- backoff_ms = 1 would retry at once: the cap is waited.
          assert.is_true(reqs[2].t_ms - reqs[1].t_ms >= 290, after
            .. ": retried after " .. (reqs[2].t_ms - reqs[1].t_ms) .. " ms")
        end
        s:close()
        rt:close()
      end)

    it("retries a dropped connection", function()
      mock.script({ rules = { { drop = true, times = 1 },
        { reply = "again" } } })
      local s, rt = session()
      local r = chat(s, client_opts(), user("x"))
      assert.are.equal("again", r.text)
      assert.are.equal(2, r.info.attempts)
      s:close()
      rt:close()
    end)

    it("gives up after `retries` and says how often it tried", function()
      mock.script({ rules = { { status = 503, message = "overloaded" } } })
      local s, rt = session()
      local r = chat(s, client_opts({ retries = 2 }), user("x"))
      assert.is_nil(r.text)
      assert.are.equal("ELLM: 503 overloaded (after 3 attempts)", r.err)
      assert.are.equal(503, r.info.status)
      assert.are.equal(3, r.info.attempts)
      assert.are.equal(1, s:llm_usage().failures)
      s:close()
      rt:close()
    end)

    it("does not retry 400", function()
      mock.script({ rules = { { status = 400, message = "bad model" } } })
      local s, rt = session()
      local r = chat(s, client_opts(), user("x"))
      assert.are.equal("ELLM: 400 bad model", r.err)
      assert.are.equal(1, r.info.attempts)
      assert.are.equal(1, mock.ctl("GET", "/_mock/stats").requests)
      s:close()
      rt:close()
    end)

    it("times out a server that never answers", function()
      mock.script({ rules = { { hang = true } } })
      local s, rt = session()
      local r = chat(s, client_opts({ timeout_ms = 150, retries = 1 }),
        user("x"))
      assert.are.equal("ELLM: 0 timeout: no reply within timeout_ms (150) "
        .. "(after 2 attempts)", r.err)
      assert.are.equal(0, r.info.status)
      s:close()
      rt:close()
    end)

    it("fails clearly when nothing listens", function()
      local s, rt = session()
      local r = chat(s, client_opts({ base_url = "http://127.0.0.1:1/v1",
        retries = 1 }), user("x"))
      assert.matches("^ELLM: 0 connection failed: .*%(after 2 attempts%)$",
        r.err)
      s:close()
      rt:close()
    end)
  end)

  describe("bad replies", function()
    it("reports a malformed body without retrying", function()
      mock.script({ rules = { { match = "1", body = "{not json" },
        { match = "2", body = '{"choices": []}' },
        { match = "3", body = '{"content": 5}', api = "anthropic" } } })
      local s, rt = session()
      local r = chat(s, client_opts(), user("1"))
      assert.matches("^ELLM: 200 malformed reply %(not JSON: ", r.err)
      assert.are.equal(1, r.info.attempts)
      r = chat(s, client_opts(), user("2"))
      assert.are.equal("ELLM: 200 malformed reply (no "
        .. "choices[0].message.content)", r.err)
      r = chat(s, client_opts({ api = "anthropic" }), user("3"))
      assert.are.equal("ELLM: 200 malformed reply (no content[] array)",
        r.err)
      s:close()
      rt:close()
    end)

    it("refuses a reply past max_response_bytes", function()
      mock.script({ rules = { { bytes = 100000 } } })
      local s, rt = session()
      local r = chat(s, client_opts({ max_response_bytes = 4096 }),
        user("x"))
      assert.are.equal("ELLM: 200 reply larger than max_response_bytes "
        .. "(4096)", r.err)
      r = chat(s, client_opts(), user("x"))
      assert.are.equal(100000, #r.text)
      s:close()
      rt:close()
    end)

    it("reads the message of a non-JSON error body", function()
      mock.script({ rules = { { status = 404, body = "no such\npath" } } })
      local s, rt = session()
      local r = chat(s, client_opts(), user("x"))
      assert.are.equal("ELLM: 404 no such path", r.err)
      s:close()
      rt:close()
    end)

    it("keeps an error body's bytes that are not UTF-8 out of the message",
      function()
        -- "\xff\xfe bad \xc3" (a lone lead byte at the end)
        mock.script({ rules = { { status = 500, body_base64 = "//4gYmFkIMM=",
          times = 1 } } })
        local s, rt = session()
        local r = chat(s, client_opts({ retries = 0 }), user("x"))
        assert.are.equal("ELLM: 500 ?? bad ?", r.err)
        s:close()
        rt:close()
      end)

    it("reads a large error body as text, not as a JSON tree", function()
      -- past 64 KiB the body is not parsed (a tree of 8 MiB of [0,0,...]
      -- cost 170 MB outside every cap): its start is the message
      local body = '{"error":{"message":"inner"},"pad":"'
        .. string.rep("x", 70000) .. '"}'
      mock.script({ rules = { { status = 400, body = body } } })
      local s, rt = session()
      local r = chat(s, client_opts(), user("x"))
      assert.truthy(r.err:find('^ELLM: 400 {"error":{"message":"inner"}'))
      mock.script({ rules = { { status = 400, body = '{"error":{"message":'
        .. '"inner"},"pad":"' .. string.rep("x", 60000) .. '"}' } } })
      r = chat(s, client_opts(), user("x"))
      assert.are.equal("ELLM: 400 inner", r.err)
      s:close()
      rt:close()
    end)

    it("ends a reply whose trailers never end", function()
      -- curl bounds headers, not a chunked reply's trailers: memory grew
      -- by 60 MB a second until the timeout
      mock.script({ rules = { { endless_trailers = true } } })
      local s, rt = session()
      local r = chat(s, client_opts({ retries = 0, timeout_ms = 20000 }),
        user("x"))
      assert.are.equal("ELLM: 200 reply headers (trailers included) larger "
        .. "than 262144 bytes", r.err)
      s:close()
      rt:close()
    end)
  end)

  describe("concurrency", function()
    it("runs at most max_concurrency requests of one client", function()
      mock.script({ delay_ms = 60, default = "d" })
      local s, rt = session()
      local r = run(s, { op = "gather", client = client_opts({
        max_concurrency = 2 }), prompts = { "1", "2", "3", "4", "5", "6" } })
      assert.are.equal(6, #r.results)
      for _, x in ipairs(r.results) do assert.are.equal("d", x.text) end
      local st = mock.ctl("GET", "/_mock/stats")
      assert.are.equal(6, st.requests)
      assert.are.equal(2, st.max_in_flight)
      s:close()
      rt:close()
    end)

    it("shares the limit between sessions' identical clients, FIFO",
      function()
        mock.script({ delay_ms = 50, default = "d" })
        local rt = runtime()
        local env = assert(rt:load(ROOT .. "/" .. FIXTURE))
        local ss, done = {}, 0
        for i = 1, 4 do
          ss[i] = assert(env:open())
          assert(ss[i]:reset())
        end
        for i = 1, 4 do
          assert(ss[i]:step_async(json.encode({ json = json.encode({
            op = "complete", prompt = "p" .. i,
            client = client_opts({ max_concurrency = 3 }) }) }),
            function(ok) if ok then done = done + 1 end end))
        end
        assert(rt:run())
        assert.are.equal(4, done)
        local st = mock.ctl("GET", "/_mock/stats")
        assert.are.equal(3, st.max_in_flight)
        local order = {}
        for i, q in ipairs(mock.ctl("GET", "/_mock/requests")) do
          order[i] = q.body.messages[1].content
        end
        assert.are.same({ "p1", "p2", "p3", "p4" }, order)
        for i = 1, 4 do ss[i]:close() end
        rt:close()
      end)

    it("runs several LLMJudges of a WeightedSum at once", function()
      mock.script({ delay_ms = 80, rules = {
        { match = "^judge 1", reply = "0.2" },
        { match = "^judge 2", reply = "Score: 0.4" },
        { match = "^judge 3", reply = "0.9" } } })
      local s, rt = session()
      local r = run(s, { op = "judge", n = 3, llm = client_opts() })
      assert.is_true(math.abs(r.score - 0.5) < 1e-9, tostring(r.score))
      local st = mock.ctl("GET", "/_mock/stats")
      assert.are.equal(3, st.requests)
      assert.are.equal(3, st.max_in_flight)
      local req = mock.ctl("GET", "/_mock/requests")[1]
      assert.matches('^judge %d: act %-> obs$',
        req.body.messages[1].content)
      assert.are.equal(3, s:llm_usage().calls)
      s:close()
      rt:close()
    end)
  end)

  describe("the API key", function()
    local key = os.getenv(KEY_ENV)

    it("is sent as the API wants it and never shows in any output",
      function()
        assert(key and #key >= 8, KEY_ENV .. " must be set (see the header)")
        mock.script({ require_key = key, rules = {
          { match = "leak", status = 401,
            message = "Incorrect API key provided: " .. key } } })
        local rt = runtime()
        local env = assert(rt:load(ROOT .. "/" .. FIXTURE))
        local s = assert(env:open())
        assert(s:reset())
        local outputs = {}
        local function step(a)
          local out, err = s:step(json.encode({ json = json.encode(a) }))
          outputs[#outputs + 1] = tostring(out) .. tostring(err)
          return out and json.decode(out).observation
        end
        local r1 = step({ op = "chat", messages = user("hi"),
          client = client_opts({ api_key_env = KEY_ENV }) })
        assert.are.equal("ok", r1.text)
        local r2 = step({ op = "chat", messages = user("hi"),
          client = client_opts({ api = "anthropic", api_key_env = KEY_ENV }) })
        assert.are.equal("ok", r2.text)
        local r3 = step({ op = "chat", messages = user("leak"),
          client = client_opts({ api_key_env = KEY_ENV }) })
        assert.are.equal("ELLM: 401 Incorrect API key provided: [redacted]",
          r3.err)
        local r4 = step({ op = "chat", messages = user("hi"),
          client = client_opts() })
        assert.are.equal("ELLM: 401 invalid api key", r4.err)
        local reqs = mock.ctl("GET", "/_mock/requests")
        assert.are.equal("Bearer " .. key, reqs[1].headers.authorization)
        assert.are.equal(key, reqs[2].headers["x-api-key"])
        assert.is_nil(reqs[4].headers.authorization)
        for _, l in ipairs(rt:logs()) do
          outputs[#outputs + 1] = l.message or l[3] or ""
        end
        outputs[#outputs + 1] = s:error() and json.encode(s:error()) or ""
        for _, o in ipairs(outputs) do
          assert.is_nil(o:find(key, 1, true), "the key leaked: " .. o)
        end
        s:close()
        rt:close()
      end)

    it("is redacted where a reply echoes it (text, finish reason)",
      function()
        mock.script({ rules = { { echo_key = true } } })
        local s, rt = session()
        local r = chat(s, client_opts({ api_key_env = KEY_ENV }), user("x"))
        assert.are.equal("your key is [redacted]", r.text)
        assert.are.equal("k=[redacted]", r.info.finish_reason)
        s:close()
        rt:close()
      end)

    it("leaves no part of it when a long error message is cut", function()
      assert(key and #key >= 8, KEY_ENV .. " must be set (see the header)")
      local s, rt = session()
      -- The message is cut to 511 bytes: the key straddles the cut.
      for _, at in ipairs({ 496, 500, 504, 507 }) do
        mock.script({ rules = { { status = 401, message = string.rep("x",
          at) .. key .. " and more" } } })
        local r = chat(s, client_opts({ api_key_env = KEY_ENV }), user("x"))
        assert.is_nil(r.text)
        assert.matches("^ELLM: 401 x+%[redacted%]", r.err)
        assert.is_nil(r.err:find(key:sub(1, 4), 1, true),
          "part of the key leaked: " .. r.err:sub(-24))
        assert.is_true(#r.err <= 512 + #"ELLM: 401 ", #r.err)
      end
      s:close()
      rt:close()
    end)

    it("leaves no part of it in a parse error of a reply", function()
      -- A reply that is not JSON where it holds the key (a proxy echoing
      -- the header): the parse error does not quote the reply.
      assert(key and #key >= 8, KEY_ENV .. " must be set (see the header)")
      local s, rt = session()
      mock.script({ rules = { { body = '{"choices":[{"message":{"content":ab'
        .. key .. '}}]}' } } })
      local r = chat(s, client_opts({ api_key_env = KEY_ENV }), user("x"))
      assert.is_nil(r.text)
      assert.matches("^ELLM: 200 malformed reply %(not JSON: invalid token "
        .. "at byte %d+%)$", r.err)
      assert.is_nil(r.err:find(key:sub(1, 2), 1, true), r.err)
      s:close()
      rt:close()
    end)

    it("names a missing variable, not a value", function()
      local s, rt = session()
      local r = run(s, { op = "bad", client = client_opts({
        api_key_env = "LUDO_TEST_NO_SUCH_VARIABLE" }) })
      assert.is_false(r.ok)
      assert.matches("ludo.llm: the environment variable "
        .. "LUDO_TEST_NO_SUCH_VARIABLE %(api_key_env%) is not set", r.err)
      s:close()
      rt:close()
    end)
  end)

  describe("cancellation", function()
    it("drops a request in flight when its session closes", function()
      mock.script({ rules = { { hang = true } } })
      local rt = runtime()
      local env = assert(rt:load(ROOT .. "/" .. FIXTURE))
      local s = assert(env:open())
      assert(s:reset())
      local calls = 0
      assert(s:step_async(json.encode({ json = json.encode({ op = "chat",
        messages = user("x"), client = client_opts() }) }),
        function() calls = calls + 1 end))
      local st
      for _ = 1, 500 do
        rt:poll(10000)
        st = mock.ctl("GET", "/_mock/stats")
        if st.in_flight == 1 then break end
      end
      assert.are.equal(1, st.in_flight)
      s:close()
      rt:poll(0)
      for _ = 1, 200 do
        st = mock.ctl("GET", "/_mock/stats")
        if st.in_flight == 0 then break end
        os.execute("sleep 0.01")
      end
      assert.are.equal(0, st.in_flight) -- the connection went
      assert.are.equal(1, calls)        -- cancelled, reported once
      local s2 = assert(env:open())     -- the runtime goes on
      assert(s2:reset())
      mock.script({ default = "still here" })
      assert.are.equal("still here", run(s2, { op = "chat",
        messages = user("x"), client = client_opts() }).text)
      s2:close()
      rt:close()
    end)
  end)

  describe("the gate", function()
    it("refuses require where the host did not allow it", function()
      for _, flags in ipairs({ 0, 1 }) do -- nowhere; scripts only
        local s, rt = session(flags)
        local r = run(s, { op = "require" })
        assert.is_false(r.ok)
        assert.matches("ludo.llm: this Lua may not call LLM APIs", r.err)
        assert.matches("lua_llm", r.err)
        s:close()
        rt:close()
      end
      local s, rt = session(2) -- sessions
      assert.is_true(run(s, { op = "require" }).ok)
      s:close()
      rt:close()
    end)
  end)

  describe("ludo run --allow-llm", function()
    local LUDO = ROOT .. "/" .. (os.getenv("LUDO_BUILD") or "build")
      .. "/ludo"
    if (os.getenv("LUDO_BUILD") or ""):sub(1, 1) == "/" then
      LUDO = os.getenv("LUDO_BUILD") .. "/ludo"
    end

    -- A policy asking the mock for its action, with the key of KEY_ENV.
    local function policy(prompt)
      local path = os.tmpname() .. ".lua"
      local f = assert(io.open(path, "wb"))
      f:write(string.format([[
local llm = require("ludo.llm")
local c
return { act = function()
  c = c or llm.client { base_url = %q, model = "m", retries = 0,
                        api_key_env = %q }
  local text, err = c:complete(%q)
  if text == nil then error(err, 0) end
  return { message = text }
end }
]], mock.base, KEY_ENV, prompt))
      f:close()
      return path
    end

    local function ludo_run(pol, ...)
      local out, err = os.tmpname(), os.tmpname()
      local cmd = { quote(LUDO), "run", quote(ROOT .. "/examples/echo"),
        "--policy", quote(pol), "--episodes", "1", "--max-steps", "6",
        "--seed", "1" }
      for _, a in ipairs({ ... }) do cmd[#cmd + 1] = quote(a) end
      local _, _, code = os.execute(table.concat(cmd, " ") .. " >" .. out
        .. " 2>" .. err)
      local o, e = slurp(out), slurp(err)
      os.remove(out)
      os.remove(err)
      return code, o .. e
    end

    it("lets a policy call the LLM, and only with the flag", function()
      local key = assert(os.getenv(KEY_ENV), KEY_ENV .. " must be set")
      mock.script({ require_key = key, default = "from the model" })
      local pol = policy("act")
      local code, out = ludo_run(pol, "--allow-llm", "--trace", "-")
      assert.are.equal(0, code, out)
      assert.matches('"echoed_message":"from the model"', out)
      assert.are.equal(6, mock.ctl("GET", "/_mock/stats").requests)
      code, out = ludo_run(pol)
      assert.are_not.equal(0, code)
      assert.matches("ludo.llm: this Lua may not call LLM APIs", out)
      os.remove(pol)
    end)

    it("never prints the key, even when the server quotes it", function()
      local key = assert(os.getenv(KEY_ENV), KEY_ENV .. " must be set")
      mock.script({ rules = { { status = 401,
        message = "Incorrect API key provided: " .. key } } })
      local pol = policy("act")
      local code, out = ludo_run(pol, "--allow-llm", "--verbose", "--json")
      assert.are_not.equal(0, code)
      assert.matches("ELLM: 401 Incorrect API key provided: %[redacted%]",
        out)
      assert.is_nil(out:find(key, 1, true), "the key leaked: " .. out)
      os.remove(pol)
    end)
  end)

  describe("base_url_env", function()
    it("takes the URL from the named variable, else base_url", function()
      mock.script({ rules = { { reply = "here" } } })
      local s, rt = session()
      -- Unset: base_url is used.
      local r = run(s, { op = "complete", prompt = "x", client = client_opts(
        { base_url_env = "LUDO_TEST_SURELY_UNSET_URL" }) })
      assert.are.equal("here", r.text)
      -- Set (HOME is a path, not a URL): the variable wins over base_url,
      -- and the error does not show its value.
      r = run(s, { op = "bad", client = client_opts(
        { base_url_env = "HOME" }), call = { messages = user("x") } })
      assert.is_false(r.ok)
      assert.matches("base_url must start with http:// or https://", r.err)
      assert.is_nil(r.err:find(os.getenv("HOME"), 1, true))
      s:close()
      rt:close()
    end)
  end)

  describe("arguments", function()
    local cases = {
      { { api = "gpt" }, nil, 'option api must be "openai" or "anthropic"' },
      { { model = false }, nil, "option model must be a string" },
      { { base_url = "ftp://x" }, nil,
        "base_url must start with http:// or https://" },
      { { temprature = 1 }, nil, "unknown client option temprature" },
      { { temperature = 3 }, nil,
        "option temperature must be a number from 0 to 2" },
      { { max_concurrency = 0 }, nil,
        "option max_concurrency must be an integer from 1 to" },
      { { stop = { 1 } }, nil, "option stop%[1%] must be a string" },
      { {}, { messages = {} }, "messages must be a non%-empty list" },
      { {}, { messages = { { role = "robot", content = "x" } } },
        'messages%[1%].role must be "system", "user" or "assistant"' },
      { {}, { messages = { { role = "user" } } },
        "messages%[1%].content must be a string" },
      { {}, { messages = user("x"), opts = { max_token = 1 } },
        "unknown call option max_token" },
    }
    it("raise with what was wrong", function()
      local s, rt = session()
      for _, c in ipairs(cases) do
        local r = run(s, { op = "bad", client = client_opts(c[1]),
          call = c[2] })
        assert.is_false(r.ok)
        assert.matches(c[3], r.err)
      end
      s:close()
      rt:close()
    end)

    it("a wait inside a coroutine of the script's own raises", function()
      mock.script({ default = "fine" })
      local s, rt = session()
      local r = run(s, { op = "own_coroutine", client = client_opts() })
      assert.are.equal(8, #r.got)
      for i, got in ipairs(r.got) do
        assert.matches("a call can wait only in the session's call or in "
          .. "ludo%.async%.gather, not inside coroutine%.wrap/resume of your "
          .. "own", got, nil, "wait " .. i .. ": " .. got)
      end
      assert.are.equal("fine", r.after) -- a gather's children still wait
      assert.are.equal(1, mock.ctl("GET", "/_mock/stats").requests)
      s:close()
      rt:close()
    end)

    it("reject NaN and infinities in every numeric option", function()
      local s, rt = session()
      local function check(name, call, msg)
        local r = run(s, { op = "nonfinite", client = client_opts(),
          name = name, call = call })
        for i, err in ipairs(r.errs) do
          assert.matches("ludo.llm: option " .. name .. " must be " .. msg,
            err, nil, name .. " value " .. i)
        end
      end
      for _, name in ipairs({ "max_tokens", "timeout_ms", "max_concurrency",
        "retries", "backoff_ms", "max_backoff_ms", "max_retry_after_ms",
        "max_response_bytes" }) do
        check(name, false, "an integer from")
      end
      check("temperature", false, "a number from 0 to 2")
      check("temperature", true, "a number from 0 to 2")
      check("max_tokens", true, "an integer from")
      s:close()
      rt:close()
    end)
  end)
end)
