-- Functional specs for the runner's step (C: runtime/script/lstep.c)
-- through ludo.host: every part of a step may wait (yield the session's
-- coroutine) and the step goes on where it was: the environment's step,
-- the transform, the rubric with its stamp, the trajectory report, a tool
-- action; a null optional field reaches the step as nil; the count of
-- steps (tool actions included) is the one state() reports.
local host = require("ludo.host")
local json = require("ludo.json")

-- A runtime and a reset session of fixture `name` (default: yielding).
local function session(name)
  local rt = assert(host.runtime({ prewarm = 0 }))
  local env = assert(rt:load("spec/fixtures/functional/"
    .. (name or "yielding")))
  local s = assert(env:open())
  assert(s:reset("{}"))
  return rt, s
end

describe("the runner's step", function()
  it("goes on after each of its parts waited", function()
    local rt, s = session()
    local out = json.decode(assert(s:step('{"n":3,"note":"hi"}')))
    -- the first step: after the reset's transform
    assert.are.same({ "transform", "step" }, out.observation.before)
    assert.are.equal("hi", out.observation.note)
    assert.are.equal(3, out.observation.n)
    assert.are.equal(0.3, out.reward)
    assert.are.equal(0.3, out.metadata.rubrics.total)
    out = json.decode(assert(s:step('{"n":5,"note":null}')))
    -- what ran after the first step's env.step, in order
    assert.are.same({ "transform", "rubric", "report", "step" },
      out.observation.before)
    assert.are.equal("none", out.observation.note) -- null: as if left out
    assert.are.equal(0.5, out.reward)
    rt:close()
  end)

  it("runs a tool action that waits, and counts it", function()
    local rt, s = session()
    local out = json.decode(assert(s:step(
      '{"type":"call_tool","tool_name":"wait","arguments":{}}')))
    assert.are.equal(json.null, out.reward) -- a tool's: not scored
    assert.is_truthy(json.encode(out.observation):find("waited", 1, true))
    assert(s:step('{"n":1}'))
    local st = json.decode(assert(s:state()))
    assert.are.equal(2, st.step_count)
    assert(s:reset("{}"))
    assert.are.equal(0, json.decode(assert(s:state())).step_count)
    rt:close()
  end)

  it("reports the trajectory at the end of an episode after waiting",
    function()
      local rt, s = session()
      local out = json.decode(assert(s:step('{"n":2,"done":true}')))
      assert.are.same({ 1 }, out.metadata.step_rewards.total)
      rt:close()
    end)

  it("refuses a bad action before any part runs, with the field named",
    function()
      local rt, s = session()
      local out, msg, code = s:step('{"n":"x"}')
      assert.is_nil(out)
      assert.are.equal("ESCHEMA", code)
      assert.is_truthy(msg:find("action.n", 1, true), msg)
      assert.are.equal(0, json.decode(assert(s:state())).step_count)
      rt:close()
    end)
end)

describe("the runner's step at its edges", function()
  local function edges() return session("step_edges") end

  -- false marks a tool's observation (neither scored nor checked): a
  -- rubric's false was taken for it, and the step went unscored
  it("refuses a rubric's boolean score, false as true", function()
    local rt, s = edges()
    for _, score in ipairs({ "false", "true" }) do
      local out, msg, code = s:step(json.encode({ score = score }))
      assert.is_nil(out)
      assert.are.equal("ESCRIPT", code)
      assert.is_truthy(msg:find("the rubric's score must be a number or "
        .. "nil, got boolean", 1, true), msg)
    end
    local out = json.decode(assert(s:step('{"score":"one"}')))
    assert.are.equal(1, out.reward)
    assert.are.equal(1, out.metadata.rubrics.total)
    rt:close()
  end)

  -- an error of the script's own making (here its C stack) is never the
  -- input's fault, wherever input() was asked from
  it("never blames the input for the script's errors", function()
    local rt, s = edges()
    local out, msg, code = s:step('{"deep":true}')
    assert.is_nil(out)
    assert.are.equal("ESCRIPT", code, msg)
    assert.is_truthy(msg:find("stack overflow", 1, true), msg)
    assert(s:step('{}')) -- the session goes on
    rt:close()
  end)

  it("is made by the runtime alone: a session's code has no maker",
    function()
      local rt, s = edges()
      local out = json.decode(assert(s:step('{}')))
      assert.is_false(out.observation.maker)
      assert.is_false(out.observation.make_step)
      rt:close()
    end)
end)
