-- Specs for the errors of a rubric call (ludo.rubric's "Errors",
-- ludo.rubric_error): a forward returning something other than a number
-- or nil fails with its type and line, and every error raised inside a
-- tree is raised again naming the path of the rubric that failed.
local Rubric = require("ludo.rubric")
local R = require("ludo.rubrics")
local async = require("ludo.async")
local util = require("testutil")
local Const, Fn = util.Const, util.Fn

-- "file:line" where function f is defined.
local function at(f)
  local info = debug.getinfo(f, "S")
  return info.short_src .. ":" .. info.linedefined
end

-- The error of calling r(action, observation), which must fail.
local function failure(r, action, observation)
  local ok, err = pcall(r, action, observation)
  assert.is_false(ok, "the call did not fail")
  return err
end

-- A leaf whose forward returns action.value.
local Echo = Rubric:extend("Echo")
function Echo.forward(_, action) return action.value end

-- A leaf that indexes a nil value.
local Boom = Rubric:extend("Boom")
function Boom.forward()
  local t = nil
  return t.x
end

-- A custom rubric with children assigned as fields.
local Grader = Rubric:extend("Grader")
function Grader:init(correct)
  self.gate = R.Gate({ correct = correct }, 0.5)
  self.style = Const(0.5)
end
function Grader:forward(a, o)
  return self.gate(a, o) * 0.5 + self.style(a, o) * 0.5
end

local TAIL = "; a rubric must return a number, or nil for no score"

describe("rubric errors", function()
  describe("a forward returning neither a number nor nil", function()
    it("fails at the root with the type, the value and forward's line",
      function()
        assert.are.equal("the root rubric (Echo): forward (defined at "
          .. at(Echo.forward) .. ') returned a string ("yes")' .. TAIL,
          failure(Echo(), { value = "yes" }))
        assert.are.equal("the root rubric (Echo): forward (defined at "
          .. at(Echo.forward) .. ") returned a boolean (true)" .. TAIL,
          failure(Echo(), { value = true }))
        assert.are.equal("the root rubric (Echo): forward (defined at "
          .. at(Echo.forward) .. ") returned a table" .. TAIL,
          failure(Echo(), { value = {} }))
      end)

    it("does not take a numeric string for a number", function()
      assert.are.equal("the root rubric (Echo): forward (defined at "
        .. at(Echo.forward) .. ') returned a string ("1")' .. TAIL,
        failure(Echo(), { value = "1" }))
    end)

    it("names the rubric by its path in the tree", function()
      local g = Grader(Echo())
      assert.are.equal("rubric gate.correct (Echo): forward (defined at "
        .. at(Echo.forward) .. ") returned a table" .. TAIL,
        failure(g, { value = {} }))
      local ws = R.WeightedSum({ { "first", Const(1), 0.5 },
        { "second", Grader(Echo()), 0.5 } })
      assert.are.equal("rubric second.gate.correct (Echo): forward (defined "
        .. "at " .. at(Echo.forward) .. ") returned a boolean (false)"
        .. TAIL, failure(ws, { value = false }))
    end)

    it("shortens long strings and escapes newlines", function()
      local err = failure(Echo(), { value = ("x"):rep(50) .. "\n" })
      assert.is_truthy(err:find('returned a string ("' .. ("x"):rep(40)
        .. '...")', 1, true), err)
      err = failure(Echo(), { value = "a\nb" })
      assert.is_truthy(err:find('returned a string ("a\\nb")', 1, true), err)
    end)

    it("is checked for rubrics with hooks too", function()
      local r = Echo()
      local seen = 0
      r:register_forward_hook(function() seen = seen + 1 end)
      assert.are.equal("the root rubric (Echo): forward (defined at "
        .. at(Echo.forward) .. ') returned a string ("x")' .. TAIL,
        failure(r, { value = "x" }))
      assert.are.equal(0, seen)
      assert.are.equal(2, r({ value = 2 }))
      assert.are.equal(1, seen)
    end)

    it("leaves nil (no score) and numbers alone", function()
      local r = Echo()
      assert.is_nil(r({ value = nil }))
      assert.is_nil(r.last_score)
      assert.are.equal(3, r({ value = 3 }))
      local nan = r({ value = 0 / 0 })
      assert.are_not.equal(nan, nan)
      assert.are.equal(math.huge, r({ value = math.huge }))
    end)
  end)

  describe("errors raised inside a tree", function()
    it("name the rubric that failed and keep the original text",
      function()
        local err = failure(R.Sequential { { "ok", Const(1) },
          { "bad", Boom() } })
        local want = "rubric bad (Boom): " .. debug.getinfo(Boom.forward,
          "S").short_src .. ":" .. (debug.getinfo(Boom.forward, "S")
          .linedefined + 2) .. ": attempt to index a nil value (local 't')"
        assert.are.equal(want, err)
      end)

    it("name the container when its own forward fails", function()
      local Sum = Rubric:extend("Sum")
      function Sum:init() self.part = Const(1) end
      function Sum:forward(a, o)
        self.part(a, o)
        error("Sum cannot add", 0)
      end
      assert.are.equal("the root rubric (Sum): Sum cannot add",
        failure(Sum()))
      local ws = R.WeightedSum({ outer = Sum() }, { outer = 1 })
      assert.are.equal("rubric outer (Sum): Sum cannot add", failure(ws))
    end)

    it("name a rubric called but not registered in the tree", function()
      local Helper = Rubric:extend("Helper")
      function Helper.forward() error("helper failed", 0) end
      local Outer = Rubric:extend("Outer")
      function Outer.forward(_, a, o) return Helper()(a, o) end
      assert.are.equal("a Helper rubric outside the tree of the root rubric "
        .. "(Outer): helper failed", failure(Outer()))
    end)

    it("pass error objects that are not strings unchanged", function()
      local obj = setmetatable({}, { __tostring = function() return "E" end })
      local r = R.WeightedSum({ a = Fn(function() error(obj) end) },
        { a = 1 })
      local ok, err = pcall(r)
      assert.is_false(ok)
      assert.are.equal(obj, err)
    end)

    it("name the right rubric on the next call after a failure",
      function()
        local g = Grader(Echo())
        failure(g, { value = "x" })
        assert.are.equal(0.75, g({ value = 1 }))
        local ws = R.WeightedSum({ first = Boom() }, { first = 1 })
        assert.is_truthy(failure(ws):find("^rubric first %(Boom%): "))
      end)

    it("after a caught child error, the caller's own call is restored",
      function()
        local Careful = Rubric:extend("Careful")
        function Careful:init() self.risky = Boom() end
        function Careful:forward(a, o)
          local ok = pcall(self.risky, a, o)
          return ok and 1 or 0
        end
        local tree = R.WeightedSum({ careful = Careful(), late = Boom() },
          { careful = 0.5, late = 0.5 })
        assert.is_truthy(failure(tree):find("^rubric late %(Boom%): "))
        assert.are.equal(0, Careful()())
      end)

    it("name the child of a concurrent WeightedSum that failed",
      function()
        -- The children start in the order a, b, c and wait; b fails at
        -- virtual time 1, c ends at 2, a at 3: the error must name b,
        -- whatever ran in the other coroutines meanwhile.
        local Wait = Fn:extend("Wait")
        Wait.async = true
        local function after(t, fail)
          return Wait(function()
            async.await(async.deferred(t))
            if fail then error(fail, 0) end
            return 1
          end)
        end
        local ws = R.WeightedSum({ a = after(3), b = after(1, "b failed"),
          c = after(2) }, { a = 0.25, b = 0.5, c = 0.25 })
        local ok, err = pcall(async.run, function() return ws() end)
        assert.is_false(ok)
        assert.are.equal("rubric b (Wait): b failed", err)
      end)

    it("name the rubric again once a stopped call is forgotten", function()
      -- A call abandoned while it waits never returns; reset() (and
      -- Rubric.call_context(nil), which the runner calls before each step)
      -- forgets it.
      local Wait = Fn:extend("Wait")
      Wait.async = true
      local tree = R.WeightedSum({ w = Wait(function()
        coroutine.yield(async.PENDING, { {} })
        return 1
      end) }, { w = 1 })
      local co = coroutine.create(function() return tree() end)
      assert.is_true(coroutine.resume(co))
      assert.are.equal("suspended", coroutine.status(co))
      local ws = R.WeightedSum({ first = Boom() }, { first = 1 })
      assert.is_nil(failure(ws):find("^rubric first"))
      tree:reset()
      assert.is_truthy(failure(ws):find("^rubric first %(Boom%): "))
      co = coroutine.create(function() return tree() end)
      assert.is_true(coroutine.resume(co))
      assert.is_nil(failure(ws):find("^rubric first"))
      assert.is_not_nil(Rubric.call_context(nil))
      assert.is_truthy(failure(ws):find("^rubric first %(Boom%): "))
    end)
  end)

  describe("containers needing a number", function()
    it("WeightedSum fails on a child giving no score", function()
      local ws = R.WeightedSum({ { "a", Const(1), 0.5 },
        { "b", Const(nil), 0.5 } })
      assert.are.equal("the root rubric (WeightedSum): child b gave no "
        .. "score (nil); a WeightedSum adds up its children's scores times "
        .. "their weights", failure(ws))
    end)

    it("WeightedSum fails on it on the concurrent path too", function()
      local Wait = Fn:extend("Wait")
      Wait.async = true
      local ws = R.WeightedSum({ a = Wait(function() return nil end) },
        { a = 1 })
      local ok, err = pcall(async.run, function() return ws() end)
      assert.is_false(ok)
      assert.are.equal("the root rubric (WeightedSum): child a gave no "
        .. "score (nil); a WeightedSum adds up its children's scores times "
        .. "their weights", err)
    end)

    it("Gate fails on a child giving no score", function()
      assert.are.equal("rubric gate (Gate): child correct gave no score "
        .. "(nil); a Gate compares its child's score with its threshold",
        failure(Grader(Const(nil))))
    end)

    it("Sequential passes a last nil on", function()
      assert.is_nil(R.Sequential { { "a", Const(1) }, { "b", Const(nil) } }())
    end)
  end)

  describe("where", function()
    local where = require("ludo.rubric_error").where

    it("gives the definition of a Lua function, nil for a C one",
      function()
        assert.are.equal(at(Echo.forward), where(Echo.forward))
        assert.is_nil(where(print))
        assert.is_nil(where(42))
      end)
  end)
end)
