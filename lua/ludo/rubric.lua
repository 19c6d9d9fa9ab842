-- ludo.rubric: the Rubric base class, a composable reward function.
--
-- A rubric computes a score from (action, observation). Subclasses
-- implement `forward(action, observation)`; instances are called:
--
--   local Rubric = require("ludo.rubric")
--   local Compiles = Rubric:extend("Compiles")
--   function Compiles:forward(action)
--     return load(action.code) and 1.0 or 0.0
--   end
--   local Code = Rubric:extend("Code")
--   function Code:init() self.compiles = Compiles() end  -- a child rubric
--   function Code:forward(a, o) return self.compiles(a, o) end
--   local score = Code()(action, observation)
--
-- This follows OpenEnv's Rubric (openenv.core.rubrics.base) with
-- these ludo differences: hooks return removal handles; reset, state_dict
-- and load_state_dict recurse into children; reset also clears last_score;
-- child names must be strings without dots and must not shadow a method;
-- waiting (async) is coroutine-based, so a call always returns the score
-- itself, never a coroutine.
--
-- Layout. A rubric instance has its own metatable whose `__index` is a
-- per-instance "view" table, whose own `__index` is the class. Child rubrics
-- live in the view, never raw in the instance, so assigning a rubric to a
-- field (`self.code = Compiles()`) always reaches `__newindex`, which
-- registers it (re-assigning a registered name replaces the child in place;
-- assigning a non-rubric to it later shadows the field but keeps the child
-- registered, as OpenEnv does). All lookups are plain table lookups.
-- A field first assigned a non-rubric value is stored raw; assigning a
-- rubric to it later does not register it (clear it with nil first, or use
-- `add_child`). The instance's private fields start with `_rb_`.
local class = require("ludo.class")

local type, error, rawget, rawset, getmetatable, setmetatable =
  type, error, rawget, rawset, getmetatable, setmetatable
local tostring, select = tostring, select
local format, find = string.format, string.find

local Rubric = class.Object:extend("Rubric")

-- Classes whose forward may wait (via ludo.async) set `async = true`.
Rubric.async = false

-- Bumped whenever a child is registered anywhere; is_async caches carry the
-- generation they were computed at.
local generation = 0

local METAMETHODS = class.METAMETHODS
local view_metas = setmetatable({}, { __mode = "k" })

local function is_rubric(v)
  -- True when `v` is a rubric instance (its metatable is marked).
  if type(v) ~= "table" then return false end
  local mt = getmetatable(v)
  return type(mt) == "table" and rawget(mt, "__rubric") == true
end

-- Returns true when `v` is a Rubric instance.
Rubric.is_rubric = is_rubric

local add_child

local function rubric_newindex(self, key, value)
  -- Field assignment: rubrics become children; see the header.
  if is_rubric(value) then
    add_child(self, key, value, false, 3)
  elseif type(key) == "string" and self._rb_map[key] ~= nil then
    self._rb_view[key] = value
  else
    rawset(self, key, value)
  end
end

-- Makes a raw rubric instance of `cls` (used by class.lua's `Cls(...)`).
function Rubric.__new(cls)
  local vm = view_metas[cls]
  if vm == nil then
    vm = { __index = cls }
    view_metas[cls] = vm
  end
  local view = setmetatable({}, vm)
  local mt = {
    __index = view, __newindex = rubric_newindex, __class = cls,
    __name = cls.__name, __rubric = true,
  }
  for i = 1, #METAMETHODS do
    local k = METAMETHODS[i]
    if k ~= "__newindex" and k ~= "__mode" then
      local v = cls[k]
      if v ~= nil then mt[k] = v end
    end
  end
  return setmetatable({
    _rb_view = view, _rb_names = {}, _rb_map = {}, _rb_list = {},
    -- Hook lists are false when empty: a raw hit, no __index walk.
    _rb_pre = false, _rb_post = false,
    -- The is_async cache: value and the generation it was computed at.
    _rb_async = false, _rb_async_gen = -1,
  }, mt)
end

-- Initialises the base; subclasses may call Rubric.init(self) but need not
-- (the base state is made before init runs).
function Rubric.init(self) end -- luacheck: ignore 212

local function contains(root, target, seen)
  -- True when `target` is `root` or one of its descendants.
  if root == target then return true end
  if seen[root] then return false end
  seen[root] = true
  local list = root._rb_list
  for i = 1, #list do
    if contains(list[i], target, seen) then return true end
  end
  return false
end

add_child = function(self, name, child, hidden, level)
  -- Registers `child` under `name`; `hidden` keeps it out of the fields.
  level = level or 2
  if type(name) ~= "string" then
    error(format("%s: a child rubric's name must be a string, got %s",
      tostring(self), type(name)), level + 1)
  end
  if name == "" or find(name, ".", 1, true) or find(name, "^_rb_") then
    error(format("%s: bad child rubric name %q (it must be non-empty and "
      .. "have no dots, which separate path components, and must not "
      .. "start with _rb_, which is reserved)",
      tostring(self), name), level + 1)
  end
  if not is_rubric(child) then
    error(format("%s: child %q is not a Rubric (got %s)", tostring(self),
      name, type(child)), level + 1)
  end
  if contains(child, self, {}) then
    error(format("%s: adding child %q would make a cycle", tostring(self),
      name), level + 1)
  end
  local view = self._rb_view
  if not hidden then
    local current = class.of(self)[name]
    if type(current) == "function" then
      error(format("%s: a child rubric named %q would hide the method %s; "
        .. "choose another name", tostring(self), name, name), level + 1)
    end
  end
  local names, map, list = self._rb_names, self._rb_map, self._rb_list
  local pos
  if map[name] == nil then
    pos = #names + 1
    names[pos] = name
  else
    for i = 1, #names do
      if names[i] == name then pos = i; break end
    end
  end
  list[pos] = child
  map[name] = child
  if not hidden then
    view[name] = child
    view[pos] = child
  end
  generation = generation + 1
end

-- Registers `child` under `name` explicitly (same as assigning the field,
-- but also works for names first used by a plain value). Returns `child`.
function Rubric:add_child(name, child)
  add_child(self, name, child, false, 2)
  return child
end

-- Registers `child` under `name` without exposing it as a field or index
-- (RubricDict uses this so keys never shadow methods). Returns `child`.
function Rubric:add_hidden_child(name, child)
  add_child(self, name, child, true, 2)
  return child
end

-- Computes the score. Subclasses must implement it.
function Rubric:forward(action, observation) -- luacheck: ignore 212
  error(format("%s.forward is not implemented: subclasses of Rubric must "
    .. "define forward(action, observation)", class.of(self).__name), 2)
end

-- rubric(action, observation): runs pre-hooks hook(self, action, obs), then
-- forward, stores last_score, runs post-hooks hook(self, action, obs, score)
-- and returns the score. The score is not clamped or checked.
function Rubric.__call(self, action, observation)
  local pre = self._rb_pre
  if pre then
    for i = 1, #pre do pre[i](self, action, observation) end
  end
  local score = self:forward(action, observation)
  self.last_score = score
  local post = self._rb_post
  if post then
    for i = 1, #post do post[i](self, action, observation, score) end
  end
  return score
end

-- The call order of OpenEnv's containers (Sequential, Gate, WeightedSum):
-- forward (and so the children) runs first, then the pre-hooks, then
-- last_score is stored and the post-hooks run. Containers install it as
-- their `__call`.
function Rubric.children_first_call(self, action, observation)
  local score = self:forward(action, observation)
  local pre = self._rb_pre
  if pre then
    for i = 1, #pre do pre[i](self, action, observation) end
  end
  self.last_score = score
  local post = self._rb_post
  if post then
    for i = 1, #post do post[i](self, action, observation, score) end
  end
  return score
end

local function is_callable(f)
  if type(f) == "function" then return true end
  local mt = getmetatable(f)
  return type(mt) == "table" and mt.__call ~= nil
end
Rubric.is_callable = is_callable

local function collect(r, prefix, out, with_names)
  -- Depth-first pre-order walk of r's descendants.
  local names, list = r._rb_names, r._rb_list
  for i = 1, #names do
    local child = list[i]
    local full = prefix == "" and names[i] or prefix .. "." .. names[i]
    out[#out + 1] = with_names and { full, child } or child
    collect(child, full, out, with_names)
  end
  return out
end

-- Returns all descendants as an array of {dotted_name, rubric} pairs,
-- depth-first pre-order ("code", "code.syntax", "style", ...). `prefix`
-- (optional) is put before every name, joined with a dot.
function Rubric:named_rubrics(prefix)
  if prefix ~= nil and type(prefix) ~= "string" then
    error("named_rubrics: prefix must be a string", 2)
  end
  return collect(self, prefix or "", {}, true)
end

-- Returns true when this rubric or any descendant may wait (its class has
-- async = true). Cached; registering a child anywhere invalidates it.
function Rubric:is_async()
  if self._rb_async_gen == generation then return self._rb_async end
  local v = self.async == true
  if not v then
    local list = self._rb_list
    for i = 1, #list do
      if list[i]:is_async() then v = true; break end
    end
  end
  self._rb_async, self._rb_async_gen = v, generation
  return v
end

-- Clears per-episode state, recursively: clears last_score and resets
-- every child. Subclasses with state override it and call
-- `Cls.super.reset(self)`.
function Rubric:reset()
  rawset(self, "last_score", nil)
  local list = self._rb_list
  for i = 1, #list do list[i]:reset() end
end

-- Checks the rubric arguments of a container constructor; `who` names the
-- caller in errors, raised at `level`. Accepts either rubrics as separate
-- arguments or one plain array of rubrics. Returns an array and its length.
function Rubric.rubric_args(who, level, ...)
  local count = select("#", ...)
  local list
  if count == 1 and type((...)) == "table" and not is_rubric((...)) then
    list = (...)
    count = #list
  else
    list = { ... }
  end
  for i = 1, count do
    if not is_rubric(list[i]) then
      error(format("%s: argument %d is not a Rubric (got %s)", who, i,
        type(list[i])), level + 1)
    end
  end
  return list, count
end

-- Rarely used methods (hooks, tree queries, state_dict/load_state_dict)
-- live in ludo.rubric_tree and are loaded the first time one is looked up,
-- so a session state that only scores does not hold their code.
local LAZY = {
  register_forward_hook = true, register_forward_pre_hook = true,
  children = true, named_children = true, rubrics = true,
  get_rubric = true, clear_last_scores = true, state_dict = true,
  load_state_dict = true,
}
local super = Rubric.super
getmetatable(Rubric).__index = function(_, k)
  if LAZY[k] then
    LAZY = {}
    require("ludo.rubric_tree")(Rubric, { collect = collect,
      is_callable = is_callable })
    return rawget(Rubric, k)
  end
  return super[k]
end

return Rubric
