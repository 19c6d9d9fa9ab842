-- Functional specs for the call scheduler (runtime/script/sched.c,
-- lua/ludo/async.lua): waiting calls interleave across sessions, every
-- callback runs exactly once and only from rt:poll()/rt:run(), and errors,
-- stray yields and cancellations come back through the callback. Driven
-- through ludo.host with the fixture spec/fixtures/functional/sleepy.
--
-- Overlap is proven with ludo.now() timestamps taken inside the sessions,
-- never with thresholds on wall time.
local host = require("ludo.host")
local json = require("ludo.json")

local FIXTURE = "spec/fixtures/functional/sleepy"

local function runtime()
  return assert(host.runtime({ module_path = ".", prewarm = 0,
    cpu_budget_ms = 5000 }))
end

-- expect(n): a callback recorder that must be called exactly n times
-- (STYLE rule 24). rec.fn is the callback; rec.calls[i] holds the packed
-- arguments of call i; rec:check() asserts the count.
local function expect(n)
  local rec = { calls = {} }
  function rec.fn(...)
    rec.calls[#rec.calls + 1] = table.pack(...)
  end
  function rec:check()
    assert.are.equal(n, #self.calls, "callback ran " .. #self.calls
      .. " times, expected " .. n)
  end
  return rec
end

local function action(mode, extra)
  local a = { mode = mode }
  for k, v in pairs(extra or {}) do a[k] = v end
  return json.encode(a)
end

-- Asserts the observation of a successful callback and returns it.
local function observation_of(call)
  assert.is_true(call[1], call[2])
  assert.are.equal("OK", call[3])
  return json.decode(call[2]).observation
end

-- Asserts that intervals {start, finish} all overlap pairwise: the latest
-- start comes before the earliest finish.
local function assert_overlap(intervals)
  local latest_start, earliest_finish = -math.huge, math.huge
  for _, iv in ipairs(intervals) do
    assert.is_true(iv.start <= iv.finish)
    latest_start = math.max(latest_start, iv.start)
    earliest_finish = math.min(earliest_finish, iv.finish)
  end
  assert.is_true(latest_start < earliest_finish,
    "the waits ran one after another, not interleaved")
end

describe("scheduler", function()
  local rt, env

  before_each(function()
    rt = runtime()
    env = assert(rt:load(FIXTURE))
  end)

  after_each(function()
    local st = rt:stats()
    assert.are.equal(0, st.calls, "calls left in flight")
    rt:close()
  end)

  local function open_sessions(n)
    local ss = {}
    for i = 1, n do
      ss[i] = assert(env:open())
      assert(ss[i]:reset())
    end
    return ss
  end

  local function close_all(ss)
    for _, s in ipairs(ss) do s:close() end
    assert.are.equal(0, rt:stats().sessions)
  end

  it("ludo.sleep in three sessions interleaves, each callback once",
    function()
      local ss = open_sessions(3)
      local recs = {}
      for i = 1, 3 do
        recs[i] = expect(1)
        assert.is_true(ss[i]:step_async(action("sleep",
          { secs = 0.05, tag = "s" .. i }), recs[i].fn))
      end
      assert.are.equal(3, rt:stats().calls)
      assert.is_true(rt:run())
      local intervals = {}
      for i = 1, 3 do
        recs[i]:check()
        local obs = observation_of(recs[i].calls[1])
        assert.are.equal("s" .. i, obs.tag)
        intervals[i] = obs
      end
      assert_overlap(intervals)
      -- Nothing is delivered twice.
      assert.is_true(rt:run())
      assert.are.equal(0, rt:poll())
      for i = 1, 3 do recs[i]:check() end
      close_all(ss)
    end)

  it("two waits inside one call (async.gather) interleave", function()
    local s = open_sessions(1)[1]
    local out = assert(s:step(action("gather", { secs = 0.03 })))
    local obs = json.decode(out).observation
    assert_overlap({ obs.first, obs.second })
    close_all({ s })
  end)

  it("a session steps again after a call that waited", function()
    local s = open_sessions(1)[1]
    for i = 1, 3 do
      local out = assert(s:step(action("sleep", { secs = 0.001,
        tag = "t" .. i })))
      assert.are.equal("t" .. i, json.decode(out).observation.tag)
    end
    local st = json.decode(assert(s:state()))
    assert.are.equal(3, st.step_count)
    close_all({ s })
  end)

  it("callbacks run from rt:poll(), never inside step_async", function()
    local s = open_sessions(1)[1]
    local rec = expect(1)
    -- The call does not wait: it is finished when step_async returns...
    assert.is_true(s:step_async(action("instant", { tag = "now" }), rec.fn))
    assert.are.equal(0, #rec.calls)
    -- ...and delivered by the next poll.
    assert.are.equal(0, rt:poll())
    rec:check()
    assert.are.equal("now", observation_of(rec.calls[1]).tag)
    assert.are.equal(0, rt:poll())
    rec:check()
    close_all({ s })
  end)

  it("a blocking call on one session defers other sessions' callbacks "
    .. "to the next poll", function()
      local ss = open_sessions(2)
      local rec = expect(1)
      assert.is_true(ss[1]:step_async(action("sleep", { secs = 0.01 }),
        rec.fn))
      -- The blocking step runs the loop long enough for ss[1] to finish.
      assert(ss[2]:step(action("sleep", { secs = 0.05 })))
      assert.are.equal(0, #rec.calls)
      assert.are.equal(0, rt:poll())
      rec:check()
      observation_of(rec.calls[1])
      close_all(ss)
    end)

  it("an error raised after a sleep reaches the callback", function()
    local s = open_sessions(1)[1]
    local rec = expect(1)
    assert.is_true(s:step_async(action("error_after_sleep"), rec.fn))
    assert.is_true(rt:run())
    rec:check()
    local ok, msg, code = table.unpack(rec.calls[1], 1, 3)
    assert.is_false(ok)
    assert.are.equal("ESCRIPT", code)
    assert.is_truthy(msg:find("^ESCRIPT: boom after sleep"), msg)
    -- The session stays usable.
    assert(s:step(action("instant")))
    close_all({ s })
  end)

  it("an error raised after a sleep in a child coroutine (gather) reaches "
    .. "the callback", function()
      local s = open_sessions(1)[1]
      local rec = expect(1)
      assert.is_true(s:step_async(action("error_in_child"), rec.fn))
      assert.is_true(rt:run())
      rec:check()
      local ok, msg, code = table.unpack(rec.calls[1], 1, 3)
      assert.is_false(ok)
      assert.are.equal("ESCRIPT", code)
      assert.is_truthy(msg:find("child failed after sleep", 1, true), msg)
      assert(s:step(action("instant")))
      close_all({ s })
    end)

  it("a bad sleep argument is a clear error", function()
    local s = open_sessions(1)[1]
    local out, msg, code = s:step(action("bad_sleep"))
    assert.is_nil(out)
    assert.are.equal("ESCRIPT", code)
    assert.is_truthy(msg:find("seconds must be between 0 and 1e9", 1, true),
      msg)
    close_all({ s })
  end)

  describe("yields outside the protocol", function()
    local cases = {
      { "yield", "ESCRIPT: the call yielded outside the ludo protocol "
        .. "(wait with ludo.async.await)" },
      { "yield_value", "ESCRIPT: the call yielded outside the ludo protocol "
        .. "(wait with ludo.async.await)" },
      { "yield_pending_nothing",
        "ESCRIPT: the call waits, but on nothing that can complete" },
    }
    for _, c in ipairs(cases) do
      it(c[1] .. " fails with a clear ESCRIPT and the session stays usable",
        function()
          local s = open_sessions(1)[1]
          local out, msg, code = s:step(action(c[1]))
          assert.is_nil(out)
          assert.are.equal("ESCRIPT", code)
          assert.are.equal(c[2], msg)
          -- Through the callback too.
          local rec = expect(1)
          assert.is_true(s:step_async(action(c[1]), rec.fn))
          assert.is_true(rt:run())
          rec:check()
          assert.are.same({ false, c[2], "ESCRIPT", n = 3 }, rec.calls[1])
          local ok = assert(s:step(action("instant", { tag = "after" })))
          assert.are.equal("after", json.decode(ok).observation.tag)
          close_all({ s })
        end)
    end
  end)

  it("ludo.sleep at module top level fails the load with a clear message",
    function()
      local bad, msg, code = rt:load("spec/fixtures/functional/sleep_at_load")
      assert.is_nil(bad)
      assert.are.equal("ELOAD", code)
      assert.is_truthy(msg:find("can only be used inside a session call", 1,
        true), msg)
      assert.is_truthy(msg:find("sleep_at_load/env.lua:3", 1, true), msg)
    end)

  describe("cancellation", function()
    it("closing a session with a call in flight delivers ECANCELED once",
      function()
        local ss = open_sessions(2)
        local rec, other = expect(1), expect(1)
        assert.is_true(ss[1]:step_async(action("forever"), rec.fn))
        assert.is_true(ss[2]:step_async(action("sleep", { secs = 0.01 }),
          other.fn))
        assert.are.equal(2, rt:poll())
        assert.are.equal(0, #rec.calls)
        ss[1]:close()
        -- Delivered by close itself.
        rec:check()
        assert.are.same({ false, "ECANCELED: the call was cancelled",
          "ECANCELED", n = 3 }, rec.calls[1])
        assert.are.equal(1, rt:stats().calls)
        -- The other session's call is not disturbed.
        assert.is_true(rt:run())
        other:check()
        observation_of(other.calls[1])
        rec:check()
        close_all({ ss[2] })
      end)

    it("a call in flight is busy: a second call is refused with EBUSY",
      function()
        local s = open_sessions(1)[1]
        local rec, second = expect(1), expect(0)
        assert.is_true(s:step_async(action("forever"), rec.fn))
        local none, msg, code = s:step_async(action("instant"), second.fn)
        assert.is_nil(none)
        assert.are.equal("EBUSY", code, msg)
        none, msg, code = s:step(action("instant"))
        assert.is_nil(none)
        assert.are.equal("EBUSY", code, msg)
        none, msg, code = s:state()
        assert.is_nil(none)
        assert.are.equal("EBUSY", code, msg)
        s:close()
        rec:check()
        second:check()
        assert.are.equal("ECANCELED", rec.calls[1][3])
      end)

    it("closing the runtime with a call in flight delivers ECANCELED once",
      function()
        local rt2 = runtime()
        local env2 = assert(rt2:load(FIXTURE))
        local s = assert(env2:open())
        local rec = expect(1)
        assert.is_true(s:step_async(action("forever"), rec.fn))
        rt2:close()
        rec:check()
        assert.are.same({ false, "ECANCELED: the call was cancelled",
          "ECANCELED", n = 3 }, rec.calls[1])
      end)
  end)

  it("reset_async and state_async complete through callbacks too",
    function()
      local s = assert(env:open())
      local r, st = expect(1), expect(1)
      assert.is_true(s:reset_async('{"episode_id":"ep-async"}', r.fn))
      assert.is_true(rt:run())
      r:check()
      observation_of(r.calls[1])
      assert.is_true(s:state_async(st.fn))
      assert.is_true(rt:run())
      st:check()
      assert.is_true(st.calls[1][1])
      assert.are.equal("ep-async", json.decode(st.calls[1][2]).episode_id)
      close_all({ s })
    end)
end)
