-- Specs for ludo.transforms: Transform, Compose, Null, Reward, apply.
local T = require("ludo.transforms")
local Rubric = require("ludo.rubric")
local util = require("testutil")

describe("ludo.transforms", function()
  it("calls apply(observation, action) on Transform instances", function()
    local Tag = T.Transform:extend("Tag")
    function Tag:init(tag) self.tag = tag end
    function Tag:apply(obs, action)
      obs.tags = (obs.tags or "") .. self.tag .. tostring(action)
      return obs
    end
    local obs = Tag("x")({}, 7)
    assert.are.equal("x7", obs.tags)
  end)

  it("raises when a subclass does not implement apply", function()
    local Bad = T.Transform:extend("Bad")
    assert.has_error(function() Bad()({}, nil) end,
      "Bad.apply is not implemented: subclasses of Transform must define "
        .. "apply(observation, action)")
  end)

  it("Null returns the observation unchanged", function()
    local obs = { a = 1 }
    assert.are.equal(obs, T.Null()(obs, "act"))
  end)

  describe("Compose", function()
    it("applies transforms in order, passing the action to each",
      function()
        local seen = {}
        local function step(name)
          return function(obs, action)
            seen[#seen + 1] = name .. ":" .. action
            obs.trail = (obs.trail or "") .. name
            return obs
          end
        end
        local c = T.Compose { step("a"), step("b"), step("c") }
        local obs = c({}, "go")
        assert.are.equal("abc", obs.trail)
        assert.are.same({ "a:go", "b:go", "c:go" }, seen)
      end)

    it("feeds each output to the next, even a new table", function()
      local c = T.Compose(function(obs) return { n = obs.n + 1 } end,
        function(obs) return { n = obs.n * 10 } end)
      assert.are.equal(20, c({ n = 1 }).n)
    end)

    it("accepts Transform instances and nested Compose", function()
      local inner = T.Compose { T.Null(), function(o) o.x = 1; return o end }
      local c = T.Compose { inner, function(o) o.x = o.x + 1; return o end }
      assert.are.equal(2, c({}).x)
    end)

    it("empty Compose is the identity", function()
      local obs = {}
      assert.are.equal(obs, T.Compose {}(obs))
    end)

    it("raises on a non-callable element", function()
      assert.has_error(function() T.Compose { T.Null(), 3 } end,
        "Compose: transform 2 is not callable (got number)")
    end)

    it("raises when a transform returns nil", function()
      local c = T.Compose { T.Null(), function() end }
      assert.has_error(function() c({}) end,
        "Compose: transform 2 returned nil (a transform must return the "
          .. "observation)")
    end)
  end)

  describe("Reward", function()
    it("sets observation.reward = rubric(action, observation)", function()
      local got = {}
      local r = util.Fn(function(a, o)
        got.action, got.obs = a, o
        return #a / 10
      end)
      local obs = { text = "hi" }
      local out = T.Reward(r)(obs, "abc")
      assert.are.equal(obs, out)
      assert.are.equal(0.3, obs.reward)
      assert.are.equal("abc", got.action)
      assert.are.equal(obs, got.obs)
      assert.are.equal(0.3, r.last_score)
    end)

    it("accepts a plain function as the rubric", function()
      local obs = T.Reward(function(a) return a * 2 end)({}, 4)
      assert.are.equal(8, obs.reward)
    end)

    it("works inside Compose after other transforms", function()
      local c = T.Compose {
        function(o) o.done = true; return o end,
        T.Reward(util.Fn(function(_, o) return o.done and 1.0 or 0.0 end)),
      }
      assert.are.equal(1.0, c({}, "x").reward)
    end)

    it("checks its arguments", function()
      assert.has_error(function() T.Reward(5) end)
      assert.has_error(function() T.Reward(util.Const(1))("obs", nil) end,
        "Reward: the observation must be a table, got string")
    end)
  end)

  describe("apply", function()
    it("applies functions, instances and nil", function()
      local obs = {}
      assert.are.equal(obs, T.apply(nil, obs))
      assert.are.equal(1, T.apply(function(o) o.v = 1; return o end, obs).v)
      assert.are.equal(obs, T.apply(T.Null(), obs))
    end)

    it("raises on non-callables and nil results", function()
      assert.has_error(function() T.apply({}, {}) end)
      assert.has_error(function() T.apply(function() end, {}) end)
    end)

    it("recognises rubrics as callables", function()
      assert.is_true(T.is_transform(util.Const(1)))
      assert.is_true(Rubric.is_callable(print))
      assert.is_false(T.is_transform({}))
    end)
  end)
end)
