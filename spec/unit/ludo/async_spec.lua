-- Specs for ludo.async: await, gather and the pure-Lua driver async.run.
local async = require("ludo.async")

local function timed(fn, ...)
  local clock = {}
  local r = table.pack(async.run(fn, clock, ...))
  return clock.now, r
end

describe("ludo.async", function()
  describe("await", function()
    it("raises outside a driven coroutine", function()
      assert.has_error(function() async.await(async.deferred(1, "x")) end,
        "async.await: not inside a ludo call (nothing can wait here); "
          .. "run the code with async.run or from a session")
    end)

    it("raises on a nil operation", function()
      assert.has_error(function() async.await(nil) end,
        "async.await: operation is nil")
    end)

    it("returns what the operation completes with", function()
      local now, r = timed(function()
        return async.await(async.deferred(2, "a", nil, 3))
      end)
      assert.are.equal(2, now)
      assert.are.same({ n = 3, "a", nil, 3 }, r)
    end)

    it("adds up sequential waits on the virtual clock", function()
      local now, r = timed(function()
        local a = async.await(async.deferred(1, 10))
        local b = async.await(async.deferred(2, 20))
        return a + b
      end)
      assert.are.equal(3, now)
      assert.are.equal(30, r[1])
    end)
  end)

  describe("can_wait", function()
    it("is false outside and true inside a driver", function()
      assert.is_false(async.can_wait())
      local _, r = timed(function() return async.can_wait() end)
      assert.is_true(r[1])
    end)
  end)

  describe("gather", function()
    it("runs waits concurrently and keeps results in list order",
      function()
        local now, r = timed(function()
          return async.gather({
            function() return async.await(async.deferred(3, "slow")) end,
            function() return async.await(async.deferred(1, "fast")) end,
            function() return "now", 2 end,
          })
        end)
        assert.are.equal(3, now)
        local res = r[1]
        assert.are.same({ n = 1, "slow" }, res[1])
        assert.are.same({ n = 1, "fast" }, res[2])
        assert.are.same({ n = 2, "now", 2 }, res[3])
      end)

    it("works without a driver when nothing waits", function()
      local res = async.gather({ function() return 1 end,
        function() return 2 end })
      assert.are.equal(1, res[1][1])
      assert.are.equal(2, res[2][1])
    end)

    it("raises without a driver when a child waits", function()
      assert.has_error(function()
        async.gather({ function()
          return async.await(async.deferred(1))
        end })
      end)
    end)

    it("composes when nested", function()
      local now, r = timed(function()
        local res = async.gather({
          function()
            local inner = async.gather({
              function() return async.await(async.deferred(2, "a")) end,
              function() return async.await(async.deferred(1, "b")) end,
            })
            return inner[1][1] .. inner[2][1]
          end,
          function() return async.await(async.deferred(2.5, "c")) end,
        })
        return res[1][1] .. res[2][1]
      end)
      assert.are.equal(2.5, now)
      assert.are.equal("abc", r[1])
    end)

    it("waits for every child, then raises the first error", function()
      local finished = false
      assert.has_error(function()
        async.run(function()
          async.gather({
            function() error("first", 0) end,
            function()
              async.await(async.deferred(1))
              finished = true
            end,
            function() error("second", 0) end,
          })
        end)
      end, "first")
      assert.is_true(finished)
    end)

    describe("with a context swap", function()
      -- One variable that each child sets and must find again after its
      -- waits, whatever the other children set meanwhile.
      local value
      local function ctx(v)
        local old = value
        value = v
        return old
      end

      it("gives each child its own value across waits", function()
        value = "caller"
        local seen = {}
        local function child(name, delay)
          return function()
            seen[name .. ".start"] = value
            value = name
            async.await(async.deferred(delay))
            seen[name .. ".after"] = value
          end
        end
        async.run(function()
          async.gather({ child("a", 2), child("b", 1) }, ctx)
          seen.caller = value
        end)
        assert.are.same({ ["a.start"] = "caller", ["b.start"] = "caller",
          ["a.after"] = "a", ["b.after"] = "b", caller = "caller" }, seen)
      end)

      it("raises with the failed child's value in place", function()
        value = "caller"
        local ok, err = pcall(async.run, function()
          async.gather({
            function()
              value = "a"
              async.await(async.deferred(2))
            end,
            function()
              value = "b"
              async.await(async.deferred(1))
              error("b failed", 0)
            end,
          }, ctx)
        end)
        assert.is_false(ok)
        assert.are.equal("b failed", err)
        assert.are.equal("b", value)
      end)
    end)
  end)

  describe("run", function()
    it("passes arguments and returns results", function()
      local now, r = timed(function(a, b) return a + b, "x" end, 1, 2)
      assert.are.equal(0, now)
      assert.are.same({ n = 2, 3, "x" }, r)
    end)

    it("raises the function's error", function()
      assert.has_error(function()
        async.run(function() error("boom", 0) end)
      end, "boom")
    end)

    it("refuses operations it cannot complete", function()
      assert.has_error(function()
        async.run(function() async.await({}) end)
      end, "async.run: cannot drive an operation without complete()")
    end)

    it("refuses yields outside the protocol", function()
      assert.has_error(function()
        async.run(function() coroutine.yield("stray") end)
      end, "async.run: the function yielded outside the ludo protocol")
    end)
  end)
end)
