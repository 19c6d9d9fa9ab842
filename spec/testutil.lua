-- spec/testutil.lua: shared helpers for the rubric and transform specs.
local Rubric = require("ludo.rubric")
local async = require("ludo.async")

local M = {}

-- Const(v): a leaf rubric that always scores v.
M.Const = Rubric:extend("Const")
function M.Const:init(v) self.value = v end
function M.Const:forward() return self.value end
function M.Const:state_dict()
  local s = M.Const.super.state_dict(self)
  s.value = self.value
  return s
end
function M.Const:load_state_dict(s)
  M.Const.super.load_state_dict(self, s)
  if s.value ~= nil then self.value = s.value end
end

-- Fn(f): a leaf rubric scoring f(action, observation).
M.Fn = Rubric:extend("Fn")
function M.Fn:init(f) self.f = f end
function M.Fn:forward(a, o) return self.f(a, o) end

-- Traced(name, log, score): a leaf that appends "<name>.forward" to log.
M.Traced = Rubric:extend("Traced")
function M.Traced:init(name, log, score)
  self.name, self.log, self.value = name, log, score
end
function M.Traced:forward()
  self.log[#self.log + 1] = self.name .. ".forward"
  return self.value
end

-- Adds hooks that log "<name>.pre" and "<name>.post" on rubric r.
function M.trace_hooks(r, name, log)
  r:register_forward_pre_hook(function() log[#log + 1] = name .. ".pre" end)
  r:register_forward_hook(function() log[#log + 1] = name .. ".post" end)
  return r
end

-- A deterministic LLM client: answers `text` (or text(prompt)), after
-- `delay` virtual seconds through ludo.async when delay is given. It keeps
-- the prompts it saw in client.prompts and the opts in client.opts.
function M.client(text, delay)
  local c = { prompts = {}, opts = {} }
  function c.complete(self, prompt, opts)
    self.prompts[#self.prompts + 1] = prompt
    self.opts[#self.opts + 1] = opts
    local answer = text
    if type(text) == "function" then answer = text(prompt) end
    if delay ~= nil then
      return async.await(async.deferred(delay, answer))
    end
    return answer
  end
  return c
end

-- Runs fn under async.run; returns the virtual end time and fn's results.
function M.run_timed(fn)
  local clock = {}
  local r = table.pack(async.run(fn, clock))
  return clock.now, table.unpack(r, 1, r.n)
end

-- Collects what a (name, rubric) iterator such as named_rubrics() yields:
-- returns the names and the rubrics, two arrays in order.
function M.collect(iter)
  local names, rubrics = {}, {}
  for name, r in iter do
    names[#names + 1], rubrics[#rubrics + 1] = name, r
  end
  return names, rubrics
end

-- Full-collects and returns the heap size in KiB.
function M.heap_kb()
  collectgarbage("collect")
  collectgarbage("collect")
  return collectgarbage("count")
end

return M
