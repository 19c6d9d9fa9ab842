-- Specs for ludo.rubric: the Rubric base class (call protocol, hooks,
-- child registration, traversal, async marking, recursive reset/state).
local Rubric = require("ludo.rubric")
local R = require("ludo.rubrics")
local class = require("ludo.class")
local jsontext = require("ludo.jsontext")
local util = require("testutil")
local Const = util.Const

-- A two-level tree used by the traversal specs:
--   Code
--     syntax   (Const 1)
--     tests    (Pair: left, right)
--     style    (Const 0.5)
local Pair = Rubric:extend("Pair")
function Pair:init(a, b) self.left = a; self.right = b end
function Pair:forward(a, o) return self.left(a, o) + self.right(a, o) end

local Code = Rubric:extend("Code")
function Code:init()
  self.syntax = Const(1)
  self.tests = Pair(Const(0.25), Const(0.5))
  self.style = Const(0.5)
end
function Code:forward(a, o)
  return self.syntax(a, o) * self.tests(a, o) + self.style(a, o)
end

describe("ludo.rubric", function()
  describe("call", function()
    it("returns forward's score unchanged and stores last_score",
      function()
        local r = Const(5)
        assert.is_nil(r.last_score)
        assert.are.equal(5, r("a", "o"))
        assert.are.equal(5, r.last_score)
        r.value = -3
        assert.are.equal(-3, r("a", "o"))
        assert.are.equal(-3, r.last_score)
      end)

    it("passes action and observation to forward", function()
      local seen
      local r = util.Fn(function(a, o) seen = { a, o }; return 0 end)
      r("act", { done = true })
      assert.are.same({ "act", { done = true } }, seen)
    end)

    it("raises when forward is not implemented", function()
      local Bare = Rubric:extend("Bare")
      assert.has_error(function() Bare()(1, 2) end,
        "the root rubric (Bare): Bare.forward is not implemented: "
          .. "subclasses of Rubric must define forward(action, observation)")
    end)

    it("is a Rubric instance with a readable name", function()
      local r = Code()
      assert.is_true(class.is_instance(r, Rubric))
      assert.is_true(Rubric.is_rubric(r))
      assert.is_false(Rubric.is_rubric(Code))
      assert.is_false(Rubric.is_rubric({}))
      assert.matches("^Code: 0x%x+$", tostring(r))
    end)

    it("always returns a number, never a coroutine or function", function()
      local ws = R.WeightedSum({ Const(1), Const(0) }, { 0.5, 0.5 })
      local v = ws(nil, nil)
      assert.are.equal("number", type(v))
      assert.are.equal(0.5, v)
    end)
  end)

  describe("hooks", function()
    it("runs pre-hooks, forward, then post-hooks with the right args",
      function()
        local log = {}
        local r = util.Traced("leaf", log, 0.7)
        r:register_forward_pre_hook(function(self, a, o, extra)
          log[#log + 1] = { "pre", self, a, o, extra }
        end)
        r:register_forward_hook(function(self, a, o, score)
          log[#log + 1] = { "post", self, a, o, score, self.last_score }
        end)
        r("A", "O")
        assert.are.same({ "pre", r, "A", "O" }, log[1])
        assert.are.equal("leaf.forward", log[2])
        assert.are.same({ "post", r, "A", "O", 0.7, 0.7 }, log[3])
        assert.are.equal(3, #log)
      end)

    it("runs several hooks in registration order", function()
      local log = {}
      local r = Const(1)
      for i = 1, 3 do
        r:register_forward_hook(function() log[#log + 1] = i end)
      end
      r()
      assert.are.same({ 1, 2, 3 }, log)
    end)

    it("removes hooks through their handles", function()
      local log = {}
      local r = Const(1)
      local h1 = r:register_forward_pre_hook(function()
        log[#log + 1] = "pre1"
      end)
      r:register_forward_pre_hook(function() log[#log + 1] = "pre2" end)
      local h3 = r:register_forward_hook(function()
        log[#log + 1] = "post"
      end)
      r()
      assert.are.same({ "pre1", "pre2", "post" }, log)
      assert.is_true(h1:remove())
      assert.is_false(h1:remove())
      assert.is_true(h3:remove())
      log = {}
      r()
      assert.are.same({ "pre2" }, log)
    end)

    it("removes only the registration of its handle", function()
      local n = 0
      local function count() n = n + 1 end
      local r = Const(1)
      local h = r:register_forward_hook(count)
      r:register_forward_hook(count)
      h:remove()
      r()
      assert.are.equal(1, n)
    end)

    it("lets a hook remove itself without disturbing the call", function()
      local log = {}
      local r = Const(1)
      local h
      h = r:register_forward_hook(function()
        log[#log + 1] = "a"
        h:remove()
      end)
      r:register_forward_hook(function() log[#log + 1] = "b" end)
      r()
      r()
      assert.are.same({ "a", "b", "b" }, log)
    end)

    it("rejects hooks that are not callable", function()
      assert.has_error(function() Const(1):register_forward_hook(5) end)
      assert.has_error(function()
        Const(1):register_forward_pre_hook(nil)
      end)
    end)
  end)

  describe("children", function()
    it("registers rubric fields in assignment order", function()
      local r = Code()
      local names = {}
      for name, child in r:named_children() do
        names[#names + 1] = name
        assert.are.equal(r[name], child)
      end
      assert.are.same({ "syntax", "tests", "style" }, names)
      assert.are.same({ r.syntax, r.tests, r.style }, r:children())
    end)

    it("keeps the position when a name is re-assigned", function()
      local r = Code()
      local new = Const(9)
      r.syntax = new
      local c = r:children()
      assert.are.equal(new, c[1])
      assert.are.equal(3, #c)
      assert.are.equal(new, r:get_rubric("syntax"))
    end)

    it("keeps a child registered when a non-rubric is assigned later",
      function()
        local r = Code()
        local old = r.style
        r.style = "plain"
        assert.are.equal("plain", r.style)
        assert.are.equal(old, r:get_rubric("style"))
        assert.are.equal(3, #r:children())
        local again = Const(2)
        r.style = again
        assert.are.equal(again, r.style)
        assert.are.equal(again, r:children()[3])
      end)

    it("keeps plain fields plain", function()
      local r = Const(1)
      r.note = "x"
      assert.are.equal("x", rawget(r, "note"))
      assert.are.equal(0, #r:children())
    end)

    it("gives each instance its own children", function()
      local a, b = Code(), Code()
      a.extra = Const(1)
      assert.are.equal(4, #a:children())
      assert.are.equal(3, #b:children())
      assert.is_nil(b.extra)
    end)

    it("indexes children by position, 1-based", function()
      local r = Code()
      assert.are.equal(r.syntax, r[1])
      assert.are.equal(r.style, r[3])
      assert.is_nil(r[4])
    end)

    it("registers explicitly with add_child", function()
      local r = Const(1)
      r.slot = 5
      local c = r:add_child("slot", Const(2))
      assert.are.equal(c, r:get_rubric("slot"))
    end)

    it("rejects bad child names", function()
      local r = Const(1)
      assert.has_error(function() r:add_child("a.b", Const(1)) end)
      assert.has_error(function() r:add_child("", Const(1)) end)
      assert.has_error(function() r:add_child(1, Const(1)) end)
      assert.has_error(function() r[true] = Const(1) end)
      assert.has_error(function() r:add_child("x", {}) end)
      assert.has_error(function() r:add_child("_rb_map", Const(1)) end)
    end)

    it("refuses a name that would hide a method", function()
      local r = Const(1)
      assert.has_error(function() r.reset = Const(2) end)
      assert.has_error(function() r:add_child("forward", Const(2)) end)
      assert.are.equal("function", type(r.reset))
    end)

    it("refuses cycles", function()
      local a, b = Const(1), Const(2)
      a.b = b
      assert.has_error(function() b.a = a end)
      assert.has_error(function() a.self = a end)
    end)
  end)

  describe("traversal", function()
    it("walks descendants depth-first pre-order with dotted names",
      function()
        local r = Code()
        local names = {}
        for name in r:named_rubrics() do names[#names + 1] = name end
        assert.are.same({ "syntax", "tests", "tests.left", "tests.right",
          "style" }, names)
        local all = r:rubrics()
        assert.are.same({ r.syntax, r.tests, r.tests.left, r.tests.right,
          r.style }, all)
      end)

    it("prefixes names", function()
      local names = util.collect(Code():named_rubrics("root"))
      assert.are.equal("root.syntax", names[1])
      assert.are.equal("root.tests.left", names[3])
    end)

    it("iterates (name, rubric) in tree order, named after the fields",
      function()
        local r = Code()
        local names, objs = util.collect(r:named_rubrics())
        assert.are.same({ "syntax", "tests", "tests.left", "tests.right",
          "style" }, names)
        for i = 1, #names do
          assert.are.equal(r:get_rubric(names[i]), objs[i])
        end
        assert.are.same({ "syntax", "tests", "style" },
          util.collect(r:named_children()))
        assert.are.same({}, util.collect(Const(1):named_rubrics()))
      end)

    it("reads the tree when called, not while iterating", function()
      local r = Code()
      local iter = r:named_rubrics()
      r.extra = Const(2)
      local names = util.collect(iter)
      assert.are.equal(5, #names)
      assert.are.equal("extra", util.collect(r:named_rubrics())[6])
    end)

    it("checks the prefix", function()
      assert.are.equal("syntax", (Code():named_rubrics("")()))
      assert.has_error(function() Code():named_rubrics(3) end,
        "named_rubrics: prefix must be a string, got number")
    end)

    it("finds rubrics by dotted path", function()
      local r = Code()
      assert.are.equal(r.tests.right, r:get_rubric("tests.right"))
      assert.are.equal(r.tests, r:get_rubric("tests"))
    end)

    it("raises on a missing path", function()
      local r = Code()
      assert.has_error(function() r:get_rubric("tests.middle") end,
        "Rubric path not found: tests.middle")
      assert.has_error(function() r:get_rubric("nope") end,
        "Rubric path not found: nope")
      assert.has_error(function() r:get_rubric("") end,
        "Rubric path not found: ")
    end)

    it("lets a runner read every last_score after a call", function()
      local r = Code()
      r(nil, nil)
      local scores = {}
      for name, child in r:named_rubrics() do
        scores[name] = child.last_score
      end
      assert.are.same({ syntax = 1, tests = 0.75, ["tests.left"] = 0.25,
        ["tests.right"] = 0.5, style = 0.5 }, scores)
      assert.are.equal(1.25, r.last_score)
    end)
  end)

  describe("is_async", function()
    local Slow = Rubric:extend("Slow")
    Slow.async = true
    function Slow:forward() return 1 end

    it("is false for a synchronous tree", function()
      assert.is_false(Code():is_async())
    end)

    it("is true when the rubric or any descendant is async", function()
      assert.is_true(Slow():is_async())
      local r = Code()
      r.tests.left = Slow()
      assert.is_true(r:is_async())
      assert.is_true(r.tests:is_async())
      assert.is_false(r.syntax:is_async())
    end)

    it("is recomputed after a child is registered deeper down", function()
      local r = Code()
      assert.is_false(r:is_async())
      r.tests.right = Slow()
      assert.is_true(r:is_async())
      r.tests.right = Const(1)
      assert.is_false(r:is_async())
    end)
  end)

  describe("reset", function()
    local Traj = R.TrajectoryRubric:extend("Traj")
    function Traj:score_trajectory(t) return #t end

    it("recurses into children, unlike OpenEnv", function()
      local traj = Traj()
      local ws = R.WeightedSum({ traj, Const(1) }, { 0.5, 0.5 })
      ws("a", {})
      ws("b", {})
      assert.are.equal(2, #traj:trajectory())
      ws:reset()
      assert.are.equal(0, #traj:trajectory())
    end)

    it("clears last_score of the whole tree", function()
      local r = Code()
      r(nil, nil)
      r:reset()
      assert.is_nil(r.last_score)
      assert.is_nil(r.tests.left.last_score)
    end)
  end)

  describe("clear_last_scores", function()
    it("clears scores of the whole tree and keeps other state", function()
      local Traj = R.TrajectoryRubric:extend("Traj2")
      function Traj:score_trajectory(t) return #t end
      local traj = Traj()
      local s = R.Sequential(Const(1), traj)
      s("a", {})
      s:clear_last_scores()
      assert.is_nil(s.last_score)
      assert.is_nil(s[1].last_score)
      assert.is_nil(traj.last_score)
      assert.are.equal(1, #traj:trajectory())
    end)
  end)

  describe("state_dict", function()
    local Judge = R.LLMJudge

    local function build(client)
      return R.Sequential(
        R.Gate(Const(0.8), 1.0),
        R.WeightedSum({
          Const(0.5),
          Judge { prompt_template = "{action}", client = client },
          R.ExponentialDiscountingTrajectoryRubric:extend("Final")(),
        }, { 0.2, 0.3, 0.5 }))
    end

    it("nests children's state by name", function()
      local s = build(util.client("0.5")):state_dict()
      assert.are.equal(1.0, s.children.rubric_0.threshold)
      assert.are.same({ 0.2, 0.3, 0.5 }, s.children.rubric_1.weights)
      local ed = s.children.rubric_1.children.rubric_2
      assert.are.same({ gamma = 0.99, intermediate_reward = 0.0 }, ed)
      assert.are.same({ value = 0.8 },
        s.children.rubric_0.children.rubric)
    end)

    it("is JSON-serialisable", function()
      local text = jsontext.encode(build(util.client("0.5")):state_dict())
      assert.matches('"weights":%[0.2,0.3,0.5%]', text)
      assert.matches('"score_pattern":null', text)
    end)

    it("reproduces scores when loaded into a fresh tree", function()
      local Final = R.ExponentialDiscountingTrajectoryRubric:extend("F")
      function Final:score_trajectory(t) return #t / 4 end
      local function tree()
        return R.Sequential(
          R.Gate(Const(0.8), 1.0),
          R.WeightedSum({
            Const(0.5),
            Judge { prompt_template = "{action}",
              client = util.client("7 of 10") },
            Final(),
          }, { 0.2, 0.3, 0.5 }))
      end
      local a = tree()
      a.rubric_0.threshold = 0.5
      a.rubric_0.rubric.value = 0.9
      a.rubric_1:load_state_dict({ weights = { 0.1, 0.6, 0.3 } })
      local j = a.rubric_1.rubric_1
      j.normalize = false
      j.score_pattern = "of (%d+)"
      j.default_score = 0.25
      local f = a.rubric_1.rubric_2
      f.gamma, f.intermediate_reward = 0.5, 0.125
      local state = a:state_dict()

      local b = tree()
      local before = b("x", { done = true })
      b:reset()
      b:load_state_dict(state)
      assert.are.same(state, b:state_dict())
      local obs = { { done = false }, { done = false }, { done = true } }
      for i = 1, 3 do
        local sa, sb = a("x", obs[i]), b("x", obs[i])
        assert.are.equal(sa, sb)
        if i == 3 then assert.are_not.equal(before, sb) end
      end
      assert.are.same(a.rubric_1.rubric_2:compute_step_rewards(),
        b.rubric_1.rubric_2:compute_step_rewards())
    end)

    it("raises on a child name the tree does not have", function()
      assert.has_error(function()
        Code():load_state_dict({ children = { nope = {} } })
      end)
      assert.has_error(function() Code():load_state_dict(5) end)
    end)

    it("leaves absent keys unchanged", function()
      local g = R.Gate(Const(1), 0.3)
      g:load_state_dict({})
      assert.are.equal(0.3, g.threshold)
    end)
  end)
end)
