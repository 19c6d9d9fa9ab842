-- Functional specs of ludo's client (runtime/net/client.c, docs/client.md)
-- against a `ludo serve` process: the Lua module ludo.client in this stock
-- lua5.4 (build/cmod/ludo/client.so), `ludo client URL --script`, `ludo run
-- URL` against a local run with the same seed, and where ludo.client may
-- be required inside ludo (policies with --allow-client; never in
-- environment code).
local client = require("ludo.client")
local json = require("ludo.json")

local ROOT = os.getenv("LUDO_ROOT") or "."
if ROOT:sub(1, 1) ~= "/" then ROOT = os.getenv("PWD") .. "/" .. ROOT end
local BUILD = os.getenv("LUDO_BUILD") or "build"
if BUILD:sub(1, 1) ~= "/" then BUILD = ROOT .. "/" .. BUILD end
local LUDO = BUILD .. "/ludo"

local function slurp(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function spit(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

local function quote(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

-- Runs a command line; returns its exit status, stdout and stderr.
local function sh(cmdline)
  local out, err = os.tmpname(), os.tmpname()
  local _, _, code = os.execute(cmdline .. " >" .. out .. " 2>" .. err)
  local o, e = slurp(out), slurp(err)
  os.remove(out)
  os.remove(err)
  return code, o, e
end

local function ludo(...)
  local parts = { quote(LUDO) }
  for _, a in ipairs({ ... }) do parts[#parts + 1] = quote(a) end
  return sh(table.concat(parts, " "))
end

local function contains(hay, needle)
  assert.is_truthy(hay:find(needle, 1, true),
    "'" .. hay .. "' does not contain '" .. needle .. "'")
end

-- A `ludo serve` on a free port, until stop().
local function serve(env, ...)
  local log = os.tmpname()
  local args = { quote(LUDO), "serve", quote(env), "--port", "0" }
  for _, a in ipairs({ ... }) do args[#args + 1] = quote(a) end
  local p = io.popen(table.concat(args, " ") .. " 2>" .. log
    .. " & echo $!")
  local pid = p:read("l")
  p:close()
  local port
  for _ = 1, 500 do
    port = slurp(log):match("http://[^:]+:(%d+)")
    if port then break end
    os.execute("sleep 0.01")
  end
  assert(port, "ludo serve did not start: " .. slurp(log))
  return {
    url = "http://127.0.0.1:" .. port,
    -- SIGTERM, then wait (at most 10 s) until the server refuses
    -- connections: it closes its listener and sends its WebSockets' 1001
    -- in one go, so a call made after stop() finds the server gone, not
    -- still running. (The process may take longer to exit: it waits for
    -- the clients' close replies.)
    stop = function()
      os.execute("kill " .. pid .. " 2>/dev/null; for i in $(seq 1000); do "
        .. "bash -c 'exec 3<>/dev/tcp/127.0.0.1/" .. port .. "' "
        .. "2>/dev/null || break; sleep 0.01; done")
      os.remove(log)
    end,
  }
end

describe("ludo.client in a stock lua5.4", function()
  local server
  setup(function() server = serve(ROOT .. "/examples/echo") end)
  teardown(function() server.stop() end)

  it("resets, steps, reads the state, lists and calls tools", function()
    local c = assert(client.connect(server.url))
    assert.matches("^ws://127%.0%.0%.1:%d+/ws$", c:url())
    local r = assert(c:reset({ seed = 1, episode_id = "lua-1" }))
    assert.are.equal("Echo environment ready!",
      r.observation.echoed_message)
    assert.are.equal(false, r.done)
    r = assert(c:step({ message = "hello" }))
    assert.are.equal("hello", r.observation.echoed_message)
    assert.are.equal(5, r.observation.message_length)
    assert.is_number(r.metadata.rubrics.total)
    -- JSON text works as well as tables.
    r = assert(c:step('{"message": "text"}'))
    assert.are.equal("text", r.observation.echoed_message)
    local st = assert(c:state())
    assert.are.same({ episode_id = "lua-1", step_count = 2 }, st)
    local tools = assert(c:list_tools())
    assert.are.equal(2, #tools)
    assert.are.equal("echo_message", tools[1].name)
    local res = assert(c:call_tool("echo_with_length", { message = "abc" }))
    assert.are.same({ message = "abc", length = 3 }, res.data)
    assert.are.equal(false, res.is_error)
    local info = assert(c:info())
    assert.are.equal("echo_env", info.name)
    assert.are.equal("string", info.action.properties.message.type)
    c:close()
    assert.has_error(function() c:state() end,
      "ludo.client: the client is closed")
    c:close() -- twice is harmless
  end)

  it("returns nil, message, code for failures and stays usable", function()
    local c = assert(client.connect(server.url, { timeout = 5 }))
    assert(c:reset())
    local r, err, code = c:step({ message = 42 })
    assert.is_nil(r)
    assert.are.equal("ESCHEMA", code)
    contains(err, "message: expected string, got integer")
    contains(err, "(VALIDATION_ERROR)")
    r, err, code = c:call_tool("nope")
    assert.is_nil(r)
    assert.are.equal("ENOENT", code)
    contains(err, "nope")
    r, err, code = c:step("{not json")
    assert.is_nil(r)
    assert.are.equal("EPARSE", code)
    contains(err, "the action is not JSON")
    r, err, code = c:step({ message = function() end })
    assert.is_nil(r)
    assert.are.equal("EVALUE", code)
    contains(err, "function")
    assert(c:step({ message = "fine" }))
    c:close()
  end)

  it("refuses URLs and options that cannot work, and dead servers",
    function()
      local c, err, code = client.connect("https://example.com")
      assert.is_nil(c)
      assert.are.equal("EINVAL", code)
      contains(err, "needs TLS")
      c, err, code = client.connect("http://127.0.0.1:1")
      assert.is_nil(c)
      assert.are.equal("ECONNECT", code)
      contains(err, "connection refused")
      assert.has_error(function()
        client.connect(server.url, { timeout = -1 })
      end, "ludo.client: option timeout must be a number of seconds above "
        .. "0, or false for none")
      assert.has_error(function()
        client.connect(server.url, { reconnect = "yes" })
      end, "ludo.client: option reconnect must be a boolean")
      assert.has_error(function() client.connect() end)
      -- false turns pings and the reply limit off
      c = assert(client.connect(server.url,
        { ping_interval = false, timeout = false }))
      assert(c:reset())
      c:close()
    end)

  it("loses the episode with the connection, and a reset starts anew",
    function()
      local s2 = serve(ROOT .. "/examples/echo")
      local c = assert(client.connect(s2.url))
      assert(c:reset())
      s2.stop()
      local r, err, code = c:step({ message = "x" })
      assert.is_nil(r)
      assert.are.equal("EDISCONNECTED", code)
      contains(err, "episode are gone")
      r, err, code = c:reset()
      assert.is_nil(r)
      assert.are.equal("ECONNECT", code)
      contains(err, "connection refused")
      c:close()
    end)
end)

describe("ludo client URL", function()
  local server
  setup(function() server = serve(ROOT .. "/examples/echo") end)
  teardown(function() server.stop() end)

  it("runs a script, one JSON line per reply", function()
    local script = os.tmpname()
    spit(script, table.concat({
      "# an episode",
      "reset {\"seed\": 3}",
      "",
      "step {\"message\": \"hi\"}",
      "state",
      "tools",
      "call echo_message {\"message\": \"yo\"}",
      "info",
      "quit",
      "state",
    }, "\n"))
    local code, out, err = ludo("client", server.url, "--script", script)
    os.remove(script)
    assert.are.equal(0, code, err)
    local lines = {}
    for l in out:gmatch("[^\n]+") do lines[#lines + 1] = json.decode(l) end
    assert.are.equal(6, #lines) -- nothing after quit
    assert.are.equal("Echo environment ready!",
      lines[1].observation.echoed_message)
    assert.are.equal("hi", lines[2].observation.echoed_message)
    assert.are.equal(1, lines[3].step_count)
    assert.are.equal(2, #lines[4].tools)
    assert.are.equal("yo", lines[5].data)
    assert.are.equal("echo_env", lines[6].name)
  end)

  it("reports failed commands with their line, goes on, exits 1",
    function()
      local script = os.tmpname()
      spit(script, "reset\nstep {\"message\": 1}\nfrobnicate\nstep "
        .. "{\"message\": \"ok\"}\ncall\n")
      local code, out, err = ludo("client", server.url, "--script", script)
      os.remove(script)
      assert.are.equal(1, code)
      contains(err, "ludo: line 2: step: ESCHEMA:")
      contains(err, "ludo: line 3: unknown command 'frobnicate'")
      contains(err, "ludo: line 5: call needs a tool name")
      contains(out, "\"echoed_message\":\"ok\"")
    end)

  it("reads stdin, and says when it cannot connect", function()
    local code, out = sh("printf 'reset\\nstate\\n' | " .. quote(LUDO)
      .. " client " .. quote(server.url))
    assert.are.equal(0, code)
    contains(out, "\"step_count\":0")
    local err
    code, out, err = ludo("client", "http://127.0.0.1:1")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    contains(err, "ECONNECT")
    code, out, err = ludo("client")
    assert.are.equal(2, code)
    assert.are.equal("", out)
    contains(err, "client needs a server's URL")
  end)
end)

describe("ludo run against a server", function()
  local server
  setup(function() server = serve(ROOT .. "/examples/echo") end)
  teardown(function() server.stop() end)

  -- Drops what differs between an in-process run and a remote one: the
  -- session id. The metadata a server also nests in the observation
  -- (OpenEnv's wire form, docs/protocol.md) is taken out by the client,
  -- so observations are the same.
  local function normalize(text)
    local lines = {}
    for l in text:gmatch("[^\n]+") do
      local v = json.decode(l)
      v.session = nil
      lines[#lines + 1] = json.encode(v)
    end
    return table.concat(lines, "\n")
  end

  it("matches a local run with the same seed", function()
    local lt, rt = os.tmpname(), os.tmpname()
    local code, lout = ludo("run", ROOT .. "/examples/echo", "--seed", "5",
      "--episodes", "3", "--max-steps", "4", "--json", "--trace", lt)
    assert.are.equal(0, code)
    local rcode, rout, rerr = ludo("run", server.url, "--seed", "5",
      "--episodes", "3", "--max-steps", "4", "--json", "--trace", rt)
    assert.are.equal(0, rcode, rerr)
    contains(rout, "\"session\":null")
    assert.are.equal(normalize(lout), normalize(rout))
    assert.are.equal(normalize(slurp(lt)), normalize(slurp(rt)))
    os.remove(lt)
    os.remove(rt)
    -- ws:// with its path works too, and a policy file.
    code, rout = ludo("run", server.url:gsub("^http", "ws") .. "/ws",
      "--max-steps", "3", "--policy", ROOT .. "/examples/echo/policy.lua")
    assert.are.equal(0, code)
    contains(rout, "total reward 1.92")
  end)

  it("says why when the server is not there or the options do not fit",
    function()
      local code, _, err = ludo("run", "http://127.0.0.1:1")
      assert.are.equal(1, code)
      contains(err, "ECONNECT")
      code, _, err = ludo("run", server.url, "--host-lib", "x.so")
      assert.are.equal(2, code)
      contains(err, "--host-lib loads native code for a local environment")
      code, _, err = ludo("run", "https://127.0.0.1:1")
      assert.are.equal(1, code)
      contains(err, "needs TLS")
    end)
end)

describe("ludo.client inside ludo", function()
  local server
  setup(function() server = serve(ROOT .. "/examples/echo") end)
  teardown(function() server.stop() end)

  local function policy()
    local file = os.tmpname() .. ".lua"
    spit(file, ([[
local client = require("ludo.client")
local c = client.connect(%q) -- top level: connects on first use
local n = 0
return {
  act = function()
    n = n + 1
    local r = assert(c:call_tool("echo_message", { message = "via " .. n }))
    return { message = r.data }
  end,
}
]]):format(server.url))
    return file
  end

  it("lets a policy reach a server with --allow-client, waiting on the "
    .. "loop", function()
      local file = policy()
      local code, out, err = ludo("run", ROOT .. "/examples/echo",
        "--policy", file, "--max-steps", "2", "--allow-client", "--trace",
        "-")
      os.remove(file)
      assert.are.equal(0, code, err)
      contains(out, "\"action\":{\"message\":\"via 1\"}")
      contains(out, "\"echoed_message\":\"via 2\"")
    end)

  it("keeps the policy sandboxed without --allow-client", function()
    local file = policy()
    local code, _, err = ludo("run", ROOT .. "/examples/echo", "--policy",
      file, "--max-steps", "2")
    os.remove(file)
    assert.are.equal(1, code)
    contains(err, "ludo.client: this Lua may not reach the network")
    contains(err, "--allow-client")
  end)

  it("is never there for environment code", function()
    for _, extra in ipairs({ {}, { "--allow-client" } }) do
      local code, _, err = ludo("run", ROOT .. "/spec/fixtures/cli/net_env",
        table.unpack(extra))
      assert.are.equal(1, code)
      contains(err, "ludo.client: this Lua may not reach the network")
    end
  end)
end)
