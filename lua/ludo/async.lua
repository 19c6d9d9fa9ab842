-- ludo.async: the waiting protocol shared by the C scheduler and pure Lua.
--
-- A call (reset/step/state/tool) runs in a coroutine driven by a *driver*:
-- the C scheduler inside ludo, or async.run() below in a stock lua5.4.
-- A primitive that must wait (a sleep, an HTTP request, an LLM call) starts
-- its work, gets back an *operation handle* (any value but nil), and calls
-- async.await(op). await yields (async.PENDING, {op, ...}) up to the driver,
-- which resumes the coroutine with (op, results...) once op completes.
--
-- async.gather runs several functions concurrently in child coroutines: it
-- forwards the union of their pending operations to the driver and routes
-- each completion to the child that waits on it. Nested gathers compose.
-- A function that never waits runs to completion without any coroutine
-- being created by gather's caller beyond the children themselves.
--
-- Pure Lua, no dependency on the C core.
local M = {}

local co_yield, co_resume, co_create, co_status =
  coroutine.yield, coroutine.resume, coroutine.create, coroutine.status
local co_isyieldable, co_running = coroutine.isyieldable, coroutine.running
local pack, unpack = table.pack, table.unpack

-- The sentinel a waiting coroutine yields first. Drivers compare against it.
M.PENDING = setmetatable({}, {
  __name = "ludo.async.PENDING",
  __tostring = function() return "ludo.async.PENDING" end,
})
local PENDING = M.PENDING

-- The child coroutines of gathers still running (weak keys). ludo's
-- scheduler lets a wait start only in the call's own coroutine or in
-- these (runtime/script/sched.c, ludo__op_new): any other coroutine in
-- between is the script's own (coroutine.wrap/resume), which would get
-- the PENDING yield as values instead of the driver.
local gathered = setmetatable({}, { __mode = "k" })
M._gathered = gathered

-- Waits for `op` and returns what its completion carries.
-- Raises when called outside a driven coroutine.
function M.await(op)
  if op == nil then error("async.await: operation is nil", 2) end
  if not co_isyieldable() then
    local _, main = co_running()
    if not main then
      error("async.await: cannot wait here: a C function that cannot "
        .. "yield is in between (a table.sort comparator, a string.gsub "
        .. "function, a metamethod or iterator called from C); wait "
        .. "outside it", 2)
    end
    error("async.await: not inside a ludo call (nothing can wait here); "
      .. "run the code with async.run or from a session", 2)
  end
  local ops = { op }
  while true do
    local r = pack(co_yield(PENDING, ops))
    if r[1] == op then return unpack(r, 2, r.n) end
    -- A completion for something else: a driver bug or a stray resume.
    error("async.await: resumed with a completion for another operation", 2)
  end
end

-- True when the running code may wait (it is inside a driven coroutine).
function M.can_wait()
  return co_isyieldable()
end

local function settle(child, ok, ...)
  -- Records how a child coroutine stopped: finished, failed or waiting.
  if not ok then
    child.err = (...)
    child.done = true
    gathered[child.co] = nil
  elseif co_status(child.co) == "dead" then
    child.res = pack(...)
    child.done = true
    gathered[child.co] = nil
  else
    local tag, ops = ...
    if tag ~= PENDING or type(ops) ~= "table" then
      child.err = "async.gather: a child yielded outside the ludo protocol"
      child.done = true
      gathered[child.co] = nil
    else
      child.ops = ops
    end
  end
end

local function resume(child, ctx, ...)
  -- Resumes a child coroutine with its own context value (see gather).
  if ctx == nil then return settle(child, co_resume(child.co, ...)) end
  local outer = ctx(child.ctx)
  settle(child, co_resume(child.co, ...))
  child.ctx = ctx(outer)
end

-- Runs every function of `fns` concurrently and returns a list of results:
-- results[i] is a table.pack of fns[i]'s return values. When one or more
-- functions fail, gather still waits for the others, then raises the first
-- error (in list order).
-- `ctx` (optional) is a context swap, ctx(v) -> previous value, for a
-- value that code keeps in one variable and that each coroutine must see
-- as its own (ludo.rubric's call in progress, Rubric.call_context): every
-- child starts with the value gather was called with and keeps its own
-- across waits; the caller's is put back when gather returns, or the
-- failed child's when gather raises its error.
function M.gather(fns, ctx)
  local n = #fns
  local children = {}
  local base
  if ctx ~= nil then base = ctx(nil); ctx(base) end
  for i = 1, n do
    local child = { co = co_create(fns[i]), ctx = base }
    gathered[child.co] = true
    children[i] = child
    resume(child, ctx)
  end
  while true do
    local ops, owner = {}, {}
    for i = 1, n do
      local child = children[i]
      if not child.done then
        for _, op in ipairs(child.ops) do
          ops[#ops + 1] = op
          owner[op] = child
        end
      end
    end
    if #ops == 0 then break end
    if not co_isyieldable() then
      error("async.gather: children wait but nothing drives this code; "
        .. "run it with async.run or from a session", 2)
    end
    local r = pack(co_yield(PENDING, ops))
    local child = owner[r[1]]
    if child == nil then
      error("async.gather: resumed with an unknown operation", 2)
    end
    resume(child, ctx, unpack(r, 1, r.n))
  end
  local results = {}
  for i = 1, n do
    local child = children[i]
    if child.err ~= nil then
      if ctx ~= nil then ctx(child.ctx) end
      error(child.err, 0)
    end
    results[i] = child.res
  end
  return results
end

-- A pure-Lua driver for tests and stock lua5.4: runs fn(...) in a coroutine
-- and completes operations itself, on a virtual clock. Operations must be
-- tables with a `complete` function returning the results, and may carry a
-- numeric `delay` (virtual seconds, default 0) counted from when the driver
-- first sees them. The driver always completes the waiting operation that
-- is due first (ties in order of appearance) and advances the clock to it,
-- so concurrent waits overlap and sequential ones add up. Returns fn's
-- results; raises fn's error. `clock` (optional table) receives the final
-- virtual time in clock.now.
function M.run(fn, clock, ...)
  local co = co_create(fn)
  local now, due = 0, setmetatable({}, { __mode = "k" })
  local r = pack(co_resume(co, ...))
  while true do
    if not r[1] then error(r[2], 0) end
    if co_status(co) == "dead" then
      if clock then clock.now = now end
      return unpack(r, 2, r.n)
    end
    if r[2] ~= PENDING then
      error("async.run: the function yielded outside the ludo protocol", 0)
    end
    local best
    for _, op in ipairs(r[3]) do
      if type(op) ~= "table" or type(op.complete) ~= "function" then
        error("async.run: cannot drive an operation without complete()", 0)
      end
      if due[op] == nil then due[op] = now + (op.delay or 0) end
      if best == nil or due[op] < due[best] then best = op end
    end
    if due[best] > now then now = due[best] end
    r = pack(co_resume(co, best, best.complete(best)))
  end
end

-- A deferred operation for async.run: completes `delay` virtual seconds
-- after the driver first sees it, with the given values.
function M.deferred(delay, ...)
  local vals = pack(...)
  return {
    delay = delay,
    complete = function() return unpack(vals, 1, vals.n) end,
  }
end

return M
