-- ludo.rubric_tree: the Rubric methods that scoring does not need (hook
-- registration and removal, tree queries, state_dict/load_state_dict).
-- ludo.rubric loads this module the first time one of them is looked up;
-- the methods are documented here and behave as if defined in ludo.rubric.
local class = require("ludo.class")

local type, error, rawget, rawset, tostring, pairs =
  type, error, rawget, rawset, tostring, pairs
local format, find = string.format, string.find
local tmove, sort = table.move, table.sort

return function(Rubric, internals)
  local collect, is_callable = internals.collect, internals.is_callable

local Handle = class.Object:extend("RubricHookHandle")

local function add_hook(self, field, fn, what)
  -- Appends a hook, copying the list so a running call is not disturbed.
  if not is_callable(fn) then
    error(format("%s: %s expects a function, got %s", tostring(self), what,
      type(fn)), 3)
  end
  local handles_field = field .. "_h"
  local old = rawget(self, field) or {}
  local oldh = rawget(self, handles_field) or {}
  local n = #old
  local new = tmove(old, 1, n, 1, {})
  local newh = tmove(oldh, 1, n, 1, {})
  local h = Handle()
  h.rubric, h.field = self, field
  new[n + 1], newh[n + 1] = fn, h
  rawset(self, field, new)
  rawset(self, handles_field, newh)
  return h
end

-- Removes the hook; returns true, or false when it was already removed.
function Handle:remove()
  local r, field = self.rubric, self.field
  if r == nil then return false end
  self.rubric = nil
  local handles_field = field .. "_h"
  local hooks, handles = rawget(r, field), rawget(r, handles_field)
  local n = #handles
  local new, newh = {}, {}
  for i = 1, n do
    if handles[i] ~= self then
      new[#new + 1], newh[#newh + 1] = hooks[i], handles[i]
    end
  end
  if #new == 0 then new, newh = false, false end
  rawset(r, field, new)
  rawset(r, handles_field, newh)
  return true
end

-- Registers hook(self, action, observation, score), run after forward.
-- Returns a handle whose :remove() unregisters it.
function Rubric:register_forward_hook(fn)
  return add_hook(self, "_rb_post", fn, "register_forward_hook")
end

-- Registers hook(self, action, observation), run before forward (after it
-- for containers, see children_first_call). Returns a removal handle.
function Rubric:register_forward_pre_hook(fn)
  return add_hook(self, "_rb_pre", fn, "register_forward_pre_hook")
end

-- Returns the immediate child rubrics, in registration order (an array).
function Rubric:children()
  local list = self._rb_list
  return tmove(list, 1, #list, 1, {})
end

-- Returns the immediate children as an array of {name, rubric} pairs:
--   for _, p in ipairs(r:named_children()) do print(p[1], p[2]) end
function Rubric:named_children()
  local names, list, out = self._rb_names, self._rb_list, {}
  for i = 1, #names do out[i] = { names[i], list[i] } end
  return out
end

-- Returns all descendant rubrics, depth-first pre-order (an array; the
-- rubric itself is not included).
function Rubric:rubrics()
  return collect(self, "", {}, false)
end

-- Returns the descendant at dotted `path` ("code.syntax"); raises
-- "Rubric path not found: <path>" when there is none.
function Rubric:get_rubric(path)
  if type(path) ~= "string" then
    error("get_rubric: path must be a string, got " .. type(path), 2)
  end
  local r = self
  local start = 1
  while true do
    local dot = find(path, ".", start, true)
    local name = path:sub(start, (dot or 0) - 1)
    r = r._rb_map[name]
    if r == nil then error("Rubric path not found: " .. path, 2) end
    if dot == nil then return r end
    start = dot + 1
  end
end

-- Sets last_score to nil on this rubric and every descendant, without
-- touching other state. A runner that reports every last_score after a
-- step can call it before the step, so that children a Sequential did not
-- reach show nil rather than an earlier step's score.
function Rubric:clear_last_scores()
  rawset(self, "last_score", nil)
  local list = self._rb_list
  for i = 1, #list do list[i]:clear_last_scores() end
end

-- Returns the configuration as plain JSON-serialisable data, recursively:
-- subclasses add their own keys (calling `Cls.super.state_dict(self)`
-- first); children's state goes under `children` by name. A leaf without
-- configuration returns an empty table.
function Rubric:state_dict()
  local s = {}
  local names, list = self._rb_names, self._rb_list
  if #names > 0 then
    local ch = {}
    for i = 1, #names do ch[names[i]] = list[i]:state_dict() end
    s.children = ch
  end
  return s
end

-- Loads configuration made by state_dict, recursively. Keys that are
-- absent are left unchanged; a child name that does not exist raises.
-- Subclasses read their own keys after calling the super method.
function Rubric:load_state_dict(state)
  if type(state) ~= "table" then
    error(format("%s: load_state_dict expects a table, got %s",
      tostring(self), type(state)), 2)
  end
  local ch = state.children
  if ch == nil then return end
  if type(ch) ~= "table" then
    error(format("%s: load_state_dict: children must be a table, got %s",
      tostring(self), type(ch)), 2)
  end
  local map, unknown = self._rb_map, {}
  for name in pairs(ch) do
    if map[name] == nil then unknown[#unknown + 1] = tostring(name) end
  end
  if #unknown > 0 then
    sort(unknown)
    error(format("%s: load_state_dict: no child rubric named %q",
      tostring(self), unknown[1]), 2)
  end
  local names, list = self._rb_names, self._rb_list
  for i = 1, #names do
    local cs = ch[names[i]]
    if cs ~= nil then list[i]:load_state_dict(cs) end
  end
end

end
