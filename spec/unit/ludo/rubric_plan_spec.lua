-- Specs for the plans of ludo.rubric ("Plans" there, built by
-- ludo.rubric_plan): the outermost call of a tree runs it from a plan,
-- and must do exactly what the calls through `__call` do. Each case runs
-- two copies of a tree side by side: one called as the outermost call
-- (planned), the other called from inside a call in progress, which never
-- uses a plan, and compares the scores, every rubric's last_score and
-- stamp, and what forwards and hooks logged, call after call, also after
-- the tree or its classes changed between calls.
local Rubric = require("ludo.rubric")
local R = require("ludo.rubrics")
local util = require("testutil")
local Const, Traced = util.Const, util.Traced

local Len = Rubric:extend("PlanLen")
function Len:forward(a) return #a.message * 0.1 end

-- A container written by a user: its forward calls its children.
local Pair = Rubric:extend("PlanPair")
function Pair:init(a, b) self.left = a; self.right = b end
function Pair:forward(a, o) return self.left(a, o) * self.right(a, o) end

-- Runs `root` as the outermost call, as the runner does each step.
-- Returns the score and the step's stamp.
local function planned(root, a, o)
  local stamp = Rubric.new_step()
  return root(a, o), stamp
end

-- Runs `root` the way __call alone does: from inside a call in progress.
local outer = Const(0)
local function unplanned(root, a, o)
  local stamp = Rubric.new_step()
  local prev = Rubric.call_context(outer)
  local score = root(a, o)
  Rubric.call_context(prev)
  return score, stamp
end

-- What the call of step `stamp` left: each rubric's path, last_score and
-- whether it was called in that step (stamped), in tree order.
local function after(root, stamp)
  local out = { { "", root.last_score, root._rb_stamp == stamp } }
  for path, r in root:named_rubrics() do
    out[#out + 1] = { path, r.last_score, r._rb_stamp == stamp }
  end
  return out
end

-- Builds two copies with make(log) and checks they agree for `n` calls;
-- change(root, i), when given, runs on both before call i.
local function agree(make, n, change)
  local log1, log2 = {}, {}
  local t1, t2 = make(log1), make(log2)
  for i = 1, n do
    if change then
      change(t1, i)
      change(t2, i)
    end
    local a = { message = ("x"):rep(i) }
    local s1, stamp1 = planned(t1, a, {})
    local s2, stamp2 = unplanned(t2, a, {})
    assert.are.equal(s2, s1)
    assert.are.same(after(t2, stamp2), after(t1, stamp1))
  end
  assert.are.same(log2, log1)
  return t1
end

-- The plan of `root` (the rubrics it lists, in order), for checking that
-- a tree is run from one at all.
local function listed(root)
  local P, out = rawget(root, "_rb_plan"), {}
  for k = 2, #P, 5 do out[#out + 1] = P[k] end
  return out
end

describe("ludo.rubric plans", function()
  it("run a WeightedSum of leaves as __call does, from a plan", function()
    local root = agree(function(log)
      return R.WeightedSum({ Len(), Traced("t", log, 0.5), Const(1) },
        { 0.5, 0.25, 0.25 })
    end, 3)
    local P = listed(root)
    assert.are.equal(4, #P)
    assert.are.equal(root, P[1])
    assert.are.equal(root:get(3), P[4])
  end)

  it("run nested sums, user containers, Sequential and Gate", function()
    agree(function(log)
      return R.WeightedSum({
        R.WeightedSum({ Len(), Traced("a", log, 1) }, { 0.5, 0.5 }),
        Pair(Const(0.5), Traced("b", log, 0.5)),
        R.Sequential(Traced("c", log, 0), Traced("d", log, 1)),
        R.Gate(Len(), 0.25),
      }, { 0.25, 0.25, 0.25, 0.25 })
    end, 4)
  end)

  it("run hooks in the same order, added before or between calls",
    function()
      agree(function(log)
        local leaf = Traced("leaf", log, 0.5)
        local root = R.WeightedSum({ leaf, Len() }, { 0.5, 0.5 })
        util.trace_hooks(leaf, "leaf", log)
        return root
      end, 3, function(root, i)
        if i == 2 then util.trace_hooks(root, "root", {}) end
        if i == 3 then
          local log = {}
          util.trace_hooks(root:get(2), "len", log)
        end
      end)
    end)

  it("see a hook that forward adds on its first call", function()
    local Adds = Rubric:extend("PlanAdds")
    function Adds:init(log) self.log = log end
    function Adds:forward()
      if not self.added then
        self.added = true
        local log = self.log
        self:register_forward_hook(function(_, _, _, score)
          log[#log + 1] = "post " .. score
        end)
      end
      return 0.5
    end
    agree(function(log)
      return R.WeightedSum({ Adds(log), Const(1) }, { 0.5, 0.5 })
    end, 3)
  end)

  it("call a forward replaced after the plan was built", function()
    local Swap = Rubric:extend("PlanSwap")
    function Swap:forward() return 0.25 end
    local Sub = Swap:extend("PlanSwapSub")
    local function make()
      return R.WeightedSum({ Sub(), Swap(), Const(1) }, { 0.25, 0.25, 0.5 })
    end
    local t = make()
    assert.are.equal(0.625, (planned(t, { message = "" }, {})))
    -- a subclass that now has one of its own
    function Sub.forward() return 0 end
    assert.are.equal(0.5625, (planned(t, { message = "" }, {})))
    -- the class's own forward, replaced in place
    Swap.forward = function() return 1 end
    assert.are.equal(0.75, (planned(t, { message = "" }, {})))
    -- one rubric's own
    t:get(3).forward = function() return 0 end
    assert.are.equal(0.25, (planned(t, { message = "" }, {})))
  end)

  it("follow children added and weights loaded between calls", function()
    agree(function()
      return R.WeightedSum({ Len(), Const(1) }, { 0.5, 0.5 })
    end, 4, function(root, i)
      if i == 2 then root:load_state_dict({ weights = { 0.75, 0.25 } }) end
      if i == 3 then root.rubric_1 = Const(0.5) end -- replaced in place
    end)
    local root = R.WeightedSum({ Pair(Const(1), Const(1)) }, { 1 })
    planned(root, { message = "" }, {})
    root:get(1).right.value = 0.5
    root:get(1).right = Const(0.25) -- a registered name: replaced
    assert.are.equal(0.25, (planned(root, { message = "" }, {})))
  end)

  it("name the rubric that failed, as the calls through __call do",
    function()
      local Fails = Rubric:extend("PlanFails")
      function Fails:forward() error("broken", 0) end
      local Bad = Rubric:extend("PlanBad")
      function Bad:forward() return "1" end
      local Nil = Rubric:extend("PlanNil")
      function Nil:forward() return nil end
      local cases = {
        { Fails(), "rubric rubric_1 %(PlanFails%): broken" },
        { Bad(), "rubric rubric_1 %(PlanBad%): forward .*returned a string" },
        { Nil(), "the root rubric %(WeightedSum%): child rubric_1 gave no "
          .. "score" },
      }
      for _, c in ipairs(cases) do
        local root = R.WeightedSum({ Const(1), c[1] }, { 0.5, 0.5 })
        for _ = 1, 2 do -- the plan is built by the first call
          local ok, err = pcall(planned, root, { message = "" }, {})
          assert.is_false(ok)
          assert.matches(c[2], err)
        end
        -- and the next call is an outermost one again
        root:get(2).forward = function() return 1 end
        assert.are.equal(1, (planned(root, { message = "" }, {})))
      end
      -- errors that are not strings pass unchanged
      local obj = setmetatable({}, {})
      local root = R.WeightedSum({ util.Fn(function() error(obj) end) },
        { 1 })
      local ok, err = pcall(planned, root, { message = "" }, {})
      assert.is_false(ok)
      assert.are.equal(obj, err)
    end)

  it("leave trees that may wait and rubrics with their own __call alone",
    function()
      local Waits = Rubric:extend("PlanWaits")
      Waits.async = true
      function Waits:forward() return 0.5 end
      local root = agree(function()
        return R.WeightedSum({ Waits(), Const(1) }, { 0.5, 0.5 })
      end, 2)
      assert.are.equal(0, #listed(root))

      local Own = Rubric:extend("PlanOwn")
      function Own:forward() return 0.5 end
      local seen = 0
      Own.__call = function(self, a, o)
        seen = seen + 1
        return Rubric.__call(self, a, o)
      end
      root = agree(function()
        return R.WeightedSum({ Own(), Const(1) }, { 0.5, 0.5 })
      end, 2)
      assert.are.equal(4, seen) -- both copies, twice
      assert.are.equal(3, #listed(root))
    end)
end)
