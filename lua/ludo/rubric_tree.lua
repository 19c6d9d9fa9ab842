-- ludo.rubric_tree: the Rubric methods that scoring does not need (hook
-- registration, removal and running, tree queries, state_dict and
-- load_state_dict, add_hidden_child, rubric_args, the default forward,
-- is_callable, and _rb_check_child, the errors of add_child). ludo.rubric
-- installs them all the first time one is looked up (see Rubric.lazy);
-- they are documented here and behave as if defined in ludo.rubric.
-- Loaded transiently (see ludo.class's transient): once installed, only
-- the methods stay.
local class = require("ludo.class")
local Rubric = require("ludo.rubric")

local type, error, rawset, tostring, pairs, getmetatable, select =
  type, error, rawset, tostring, pairs, getmetatable, select
local format, find = string.format, string.find
local tmove, sort = table.move, table.sort

local hooked

-- The methods, all installed in Rubric.
local T = {}

local Handle = class.Object:extend("RubricHookHandle")

-- Hooks live in the instance's `_rb_hooks`: false, or a table {pre hooks,
-- post hooks, pre handles, post handles, the hooked call}. Every change
-- makes new lists, so a running call is not disturbed.
local function add_hook(self, kind, fn, what)
  if not T.is_callable(fn) then
    error(format("%s: %s expects a function, got %s", tostring(self), what,
      type(fn)), 3)
  end
  local old = self._rb_hooks or { {}, {}, {}, {} }
  local new = { old[1], old[2], old[3], old[4], hooked }
  local fns, handles = old[kind], old[kind + 2]
  local n = #fns
  local h = Handle()
  h.rubric, h.kind = self, kind
  new[kind] = tmove(fns, 1, n, 1, { [n + 1] = fn })
  new[kind + 2] = tmove(handles, 1, n, 1, { [n + 1] = h })
  rawset(self, "_rb_hooks", new)
  return h
end

-- Removes the hook; returns true, or false when it was already removed.
function Handle:remove()
  local r, kind = self.rubric, self.kind
  if r == nil then return false end
  self.rubric = nil
  local old = r._rb_hooks
  local new = { old[1], old[2], old[3], old[4], hooked }
  local fns, handles, nf, nh = old[kind], old[kind + 2], {}, {}
  for i = 1, #handles do
    if handles[i] ~= self then
      nf[#nf + 1], nh[#nh + 1] = fns[i], handles[i]
    end
  end
  new[kind], new[kind + 2] = nf, nh
  if #new[1] == 0 and #new[2] == 0 then new = false end
  rawset(r, "_rb_hooks", new)
  return true
end

-- Registers hook(self, action, observation, score), run after forward.
-- Returns a handle whose :remove() unregisters it.
function T:register_forward_hook(fn)
  return add_hook(self, 2, fn, "register_forward_hook")
end

-- Registers hook(self, action, observation), run before forward (after it
-- for containers, see children_first_call). Returns a removal handle.
function T:register_forward_pre_hook(fn)
  return add_hook(self, 1, fn, "register_forward_pre_hook")
end

local function run_pre(self, action, observation)
  local h = self._rb_hooks
  if h then
    h = h[1]
    for i = 1, #h do h[i](self, action, observation) end
  end
end

-- A call of a rubric that has hooks (ludo.rubric's __call hands over to
-- this, before forward, or after it with `ran` and the score when forward
-- registered the first hook).
hooked = function(self, action, observation, children_first, ran, score)
  if not ran then
    if not children_first then run_pre(self, action, observation) end
    score = self:forward(action, observation)
    if math.type(score) == nil and score ~= nil then
      class.transient("ludo.rubric_error").bad_score(self, score)
    end
  end
  if children_first then run_pre(self, action, observation) end
  self.last_score = score
  local h = self._rb_hooks
  if h then
    h = h[2]
    for i = 1, #h do h[i](self, action, observation, score) end
  end
  return score
end

-- Registers `child` under `name` without exposing it as a field or index
-- (RubricDict uses this so keys never shadow methods). Returns `child`.
function T:add_hidden_child(name, child)
  return (Rubric.add_child(self, name, child, true, 3))
end

-- Computes the score. Subclasses must implement it.
function T:forward(action, observation) -- luacheck: ignore 212
  error(format("%s.forward is not implemented: subclasses of Rubric must "
    .. "define forward(action, observation)", self.__name), 0)
end

-- Returns true when `f` is a function or has a __call metamethod.
function T.is_callable(f)
  if type(f) == "function" then return true end
  local mt = getmetatable(f)
  return type(mt) == "table" and mt.__call ~= nil
end

-- Returns the immediate child rubrics, in registration order (an array).
function T:children()
  local list = self._rb_list
  return tmove(list, 1, #list, 1, {})
end

-- Returns an iterator over the immediate children as (name, rubric), in
-- registration order (read when named_children is called):
--   for name, child in r:named_children() do print(name, child) end
function T:named_children()
  local map, list = self._rb_map, self._rb_list
  local names, objs, i = tmove(map, 1, #list, 1, {}), T.children(self), 0
  return function()
    i = i + 1
    local r = objs[i]
    if r ~= nil then return names[i], r end
  end
end

-- Returns all descendant rubrics, depth-first pre-order (an array; the
-- rubric itself is not included).
function T:rubrics()
  local out = {}
  for _, r in self:named_rubrics() do out[#out + 1] = r end
  return out
end

-- Returns the descendant at dotted `path` ("code.syntax"); raises
-- "Rubric path not found: <path>" when there is none.
function T:get_rubric(path)
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
function T:clear_last_scores()
  rawset(self, "last_score", nil)
  local list = self._rb_list
  for i = 1, #list do list[i]:clear_last_scores() end
end

-- Returns the configuration as plain JSON-serialisable data, recursively:
-- subclasses add their own keys (calling `Cls.super.state_dict(self)`
-- first); children's state goes under `children` by name. A leaf without
-- configuration returns an empty table.
function T:state_dict()
  local s = {}
  local names, list = self._rb_map, self._rb_list
  if #list > 0 then
    local ch = {}
    for i = 1, #list do ch[names[i]] = list[i]:state_dict() end
    s.children = ch
  end
  return s
end

-- Loads configuration made by state_dict, recursively. Keys that are
-- absent are left unchanged; a child name that does not exist raises.
-- Subclasses read their own keys after calling the super method.
function T:load_state_dict(state)
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
    if type(name) ~= "string" or map[name] == nil then
      unknown[#unknown + 1] = tostring(name)
    end
  end
  if #unknown > 0 then
    sort(unknown)
    error(format("%s: load_state_dict: no child rubric named %q",
      tostring(self), unknown[1]), 2)
  end
  local list = self._rb_list
  for i = 1, #list do
    local cs = ch[map[i]]
    if cs ~= nil then list[i]:load_state_dict(cs) end
  end
end

-- Checks the rubric arguments of a container constructor; `who` names the
-- caller in errors, raised at `level`. Accepts either rubrics as separate
-- arguments or one plain array of rubrics. Returns an array and its length.
-- (The containers check their arguments inline and call this only to
-- raise the error.)
function T.rubric_args(who, level, ...)
  local count = select("#", ...)
  local list
  if count == 1 and type((...)) == "table" and not Rubric.is_rubric((...))
  then
    list = (...)
    count = #list
  else
    list = { ... }
  end
  for i = 1, count do
    if not Rubric.is_rubric(list[i]) then
      error(format("%s: argument %d is not a Rubric (got %s)", who, i,
        type(list[i])), level + 1)
    end
  end
  return list, count
end

-- Checks a child registration for ludo.rubric_build, which calls this for
-- a name starting with "_" or when one of its checks failed: raises at
-- `level` (default 2) counted from ludo.rubric's add_child, or returns when
-- the registration is fine after all.
function T._rb_check_child(self, name, child, hidden, level)
  level = (level or 2) + 2
  if type(name) ~= "string" then
    error(format("%s: a child rubric's name must be a string, got %s",
      tostring(self), type(name)), level)
  end
  if name == "" or find(name, ".", 1, true) or find(name, "^_rb_")
    or find(name, "^__") then
    error(format("%s: bad child rubric name %q (it must be non-empty and \z
      have no dots, which separate path components, and must not start \z
      with _rb_ or __, which are reserved)", tostring(self), name), level)
  end
  if not Rubric.is_rubric(child) then
    error(format("%s: child %q is not a Rubric (got %s)", tostring(self),
      name, type(child)), level)
  end
  if class.transient("ludo.rubric_build").contains(child, self, {}) then
    error(format("%s: adding child %q would make a cycle", tostring(self),
      name), level)
  end
  if not hidden and type(class.of(self)[name]) == "function" then
    error(format("%s: a child rubric named %q would hide the method %s; \z
      choose another name", tostring(self), name, name), level)
  end
end

-- Loaded through class.transient (see ludo.class).
return T
