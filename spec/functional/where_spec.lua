-- Functional specs for errors that say where and what (docs/sandbox.md
-- "Errors"), through ludo.host: tracebacks name file:line in environment
-- code and in ludo's library, whichever copy of the library was loaded,
-- and a limit names the call's phase and the place the Lua was, in the
-- message and in s:error() (ludo_session_error). Fixture:
-- spec/fixtures/c/where (shared with spec/c/test-where.c; its line
-- numbers are asserted here too).
local host = require("ludo.host")
local json = require("ludo.json")

local FIXTURE = "spec/fixtures/c/where"
local ENVF = FIXTURE .. "/env.lua"

local function runtime(opts)
  local o = { prewarm = 0 }
  for k, v in pairs(opts or {}) do o[k] = v end
  return assert(host.runtime(o))
end

local function session(rt)
  local env = assert(rt:load(FIXTURE))
  local s = assert(env:open())
  assert(s:reset("{}"))
  return s
end

local function step(s, phase, what)
  return s:step(json.encode({ phase = phase, what = what }))
end

local function ends_with(s, tail)
  return s:sub(-#tail) == tail
end

describe("errors that say where", function()
  it("s:error() is nil until a call fails, then describes it", function()
    local rt = runtime()
    local s = session(rt)
    assert.is_nil(s:error())
    local out, msg, code = step(s, "step", "raise")
    assert.is_nil(out)
    assert.are.equal("ESCRIPT", code)
    assert.are.same({ code = "ESCRIPT", message = msg, call = "step",
      phase = "step", where = "" }, s:error())
    -- A later success leaves the description of the last failure.
    assert.is_string((step(s, "none", "ok")))
    assert.are.equal(msg, s:error().message)
    rt:close()
  end)

  it("tracebacks name the library's lines wherever it was loaded from",
    function()
      -- module_path "." loads the tree's files, none the embedded copies:
      -- the names and the lines are the same.
      local seen = {}
      for _, path in ipairs({ ".", false }) do
        local rt = runtime({ module_path = path or nil })
        local s = session(rt)
        local _, msg = step(s, "rubric", "raise")
        assert.is_truthy(msg:find("^ESCRIPT: the root rubric %(Probe%): "
          .. ENVF:gsub("%p", "%%%0") .. ":13: raised on purpose"), msg)
        assert.is_nil(msg:find("?:-1", 1, true), msg)
        local rubric = msg:match("\n\tlua/ludo/rubric%.lua:(%d+): in ")
        assert.is_string(rubric, msg)
        seen[#seen + 1] = rubric
        rt:close()
      end
      assert.are.equal(seen[1], seen[2])
    end)

  it("a CPU budget names the rubric of step and the line", function()
    local rt = runtime({ cpu_budget_ms = 50 })
    local s = session(rt)
    local out, msg, code = step(s, "rubric", "spin")
    assert.is_nil(out)
    assert.are.equal("ETIMEOUT", code)
    assert.are.equal("ETIMEOUT: the call exceeded its CPU budget of 50 ms "
      .. "(at " .. ENVF .. ":6) during the rubric of step", msg)
    assert.are.same({ code = "ETIMEOUT", message = msg, call = "step",
      phase = "rubric", where = ENVF .. ":6" }, s:error())
    assert.is_string((step(s, "none", "ok")))
    rt:close()
  end)

  it("a memory cap names the transform of reset and the line", function()
    local rt = runtime({ memory_cap = 4 << 20 })
    local s = session(rt)
    local out, msg, code = s:reset(json.encode({ phase = "transform",
      what = "alloc" }))
    assert.is_nil(out)
    assert.are.equal("ENOMEM", code)
    assert.are.equal("ENOMEM: the session's memory limit of 4194304 bytes "
      .. "was reached (at " .. ENVF .. ":9) during the transform of reset",
      msg)
    local e = s:error()
    assert.are.equal("reset", e.call)
    assert.are.equal("transform", e.phase)
    assert.are.equal(ENVF .. ":9", e.where)
    assert.is_string((s:reset("{}")))
    rt:close()
  end)

  it("a wall-clock limit names where the call waited", function()
    local rt = runtime({ wall_limit_ms = 30 })
    local s = session(rt)
    assert.is_string((step(s, "state", "sleep")))
    local out, msg, code = s:state()
    assert.is_nil(out)
    assert.are.equal("ETIMEOUT", code)
    local e = s:error()
    assert.are.equal("state", e.call)
    assert.are.equal("state", e.phase)
    -- Inside ludo's await, called from the fixture's ludo.sleep line.
    assert.is_truthy(e.where:find("^lua/ludo/async%.lua:%d+, from "), e.where)
    assert.is_true(ends_with(e.where, ", from " .. ENVF .. ":11"), e.where)
    assert.are.equal("ETIMEOUT: the call exceeded its wall-clock limit of "
      .. "30 ms (at " .. e.where .. ") during state", msg)
    rt:close()
  end)
end)
