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
-- itself, never a coroutine; named_children and named_rubrics are
-- iterators, `for name, r in rubric:named_rubrics() do ... end`, as
-- OpenEnv's are generators; a forward must return a number, or nil for no
-- score, and errors name the rubric that failed.
--
-- Errors. A call checks what forward returned: anything but a number or
-- nil raises "forward (defined at env.lua:12) returned a string (...)".
-- The outermost rubric call in progress (the root of a tree, as called by
-- the runner or a test) catches every error raised below it and raises it
-- again with the path of the rubric that failed, from the root:
-- "rubric gate.correct (Correct): env.lua:14: attempt to ...", or "the
-- root rubric (WeightedSum): ...". Error values that are not strings
-- (ludo's error objects: a time or memory limit, a host failure with its
-- code) pass unchanged. The rubric that failed is the innermost one whose
-- call was in progress: a call records itself in `current` and puts the
-- caller's back when it returns, so after an error `current` still names
-- the innermost. Code that runs rubrics concurrently passes
-- Rubric.call_context to ludo.async.gather (WeightedSum does), which keeps
-- one `current` per child coroutine. A call stopped while waiting (a
-- wall-clock limit, a cancelled call) never returns: the runner clears
-- `current` before each step (Rubric.new_step()), and reset() clears it
-- too. The formatting lives in ludo.rubric_error, loaded only when an
-- error is raised.
--
-- Step stamps. Rubric.new_step() also advances the state's step stamp,
-- and every call records the stamp of its step on the rubric
-- (`_rb_stamp`): a rubric whose stamp is not the step's was not called in
-- this step (a Sequential stopped before it, a Gate closed), so the C
-- core reports null for it in metadata.rubrics, not the last_score a
-- previous step left (which stays, as in OpenEnv).
--
-- Layout. A rubric without children has its class as metatable (a method
-- lookup is one table lookup). Its first child gives it its own metatable,
-- its "view": a copy of the class's metamethods with `__index` = the view
-- itself, whose own metatable is the class. Child rubrics live in the view
-- (by name and by position), never raw in the instance, so assigning a
-- rubric to a field (`self.code = Compiles()`) always reaches `__newindex`,
-- which registers it (re-assigning a registered name replaces the child in
-- place; assigning a non-rubric to it later shadows the field but keeps the
-- child registered, as OpenEnv does). All lookups are plain table lookups
-- (but see Rubric.lazy).
-- A field first assigned a non-rubric value is stored raw; assigning a
-- rubric to it later does not register it (clear it with nil first, or use
-- `add_child`). The instance's private fields start with `_rb_`; child
-- names starting with `_rb_` or `__` are reserved.
--
-- Code size is paid by every session state, so the rarely used methods
-- (hooks, tree queries, state_dict/load_state_dict, add_hidden_child,
-- rubric_args, the default forward, is_callable) and the errors of
-- add_child live in ludo.rubric_tree, installed the first time one is
-- looked up (see Rubric.lazy), and the work of add_child in
-- ludo.rubric_build; both are loaded transiently (see ludo.class's
-- transient): an idle state that only scores holds neither.
local class = require("ludo.class")

local transient = class.transient
local mtype, pcall, error, type = math.type, pcall, error, type
local Rubric = class.Object:extend("Rubric")

-- is_score(v): true when v is a number or nil, what a forward may return.
-- Every rubric call asks, so in a session it is ludo.core's C test (a
-- boolean, where math.type makes a string); elsewhere math.type.
local is_score
do
  local ok, core = pcall(require, "ludo.core")
  is_score = ok and type(core) == "table" and core.is_score
    or function(v) return v == nil or mtype(v) ~= nil end
end

-- Classes whose forward may wait (via ludo.async) set `async = true`.
Rubric.async = false

-- The children: `_rb_list` is the array of child rubrics, `_rb_map` the
-- array of their names (same order) and the map name -> child. A rubric
-- without children shares this empty table (never modified) with every
-- other; its first child gives it its own.
local none = {}
Rubric._rb_list, Rubric._rb_map = none, none

-- gen[1] is bumped whenever a child is registered anywhere; the is_async
-- cache `_rb_async` of a rubric with children is gen[1] * 2 + (1 when
-- async). Combinators read it inline (Rubric._rb_gen): a synchronous
-- tree, the usual one, then skips the call to is_async on every step.
local gen = { 0 }
Rubric._rb_gen = gen

-- Registers `child` under `name` explicitly (same as assigning the field,
-- but also works for names first used by a plain value). Returns `child`.
-- Internal: `hidden` keeps the child out of the fields (see
-- add_hidden_child); errors are raised at `level` (default 2, the caller).
-- The work is done by ludo.rubric_build.
local function add_child(self, name, child, hidden, level)
  transient("ludo.rubric_build").add_child(self, name, child, hidden, level)
  gen[1] = gen[1] + 1
  return child
end
Rubric.add_child = add_child

local is_rubric

local function rubric_newindex(self, key, value)
  -- Field assignment: rubrics become children; see the header.
  if is_rubric(value) then
    add_child(self, key, value, false, 4)
  elseif type(key) == "string" and self._rb_map[key] ~= nil then
    rawset(getmetatable(self), key, value)
  else
    rawset(self, key, value)
  end
end
Rubric.__newindex = rubric_newindex

-- Returns true when `v` is a Rubric instance.
function is_rubric(v)
  if type(v) ~= "table" then return false end
  local mt = getmetatable(v)
  return type(mt) == "table" and rawget(mt, "__newindex") == rubric_newindex
end
Rubric.is_rubric = is_rubric

-- Makes a raw rubric instance of `cls` (used by class.lua's `Cls(...)`).
-- The hooks are false while there are none: a raw hit, no __index walk.
function Rubric.__new(cls)
  return setmetatable({ _rb_hooks = false, _rb_stamp = false }, cls)
end

-- The innermost rubric call in progress, or nil (see "Errors" above).
local current
-- The step stamp: calls record it on their rubric (see "Step stamps").
local stamp = 0

-- Rubric.call_context(v): makes `v` the innermost rubric call in progress
-- and returns the previous one. ludo.async.gather(fns, Rubric.call_context)
-- uses it to give each child coroutine its own; call_context(nil) forgets
-- a call that was stopped without returning.
function Rubric.call_context(v)
  local old = current
  current = v
  return old
end

-- Rubric.new_step(): a step begins (the runner calls it before the step's
-- rubric call): forgets a call a stopped step left in progress and
-- advances the step stamp (see "Step stamps" above), which it returns.
function Rubric.new_step()
  current = nil
  stamp = stamp + 1
  return stamp
end

local function outermost(call, self, action, observation)
  -- A rubric call while none is in progress: runs `call` (the rubric's
  -- own) protected and names the rubric that failed in the errors raised
  -- below it.
  current = self
  local ok, score = pcall(call, self, action, observation)
  local failed = current
  current = nil
  if ok then return score end
  -- A memory error goes on as it is: the core knows it by its text and
  -- by the cap having refused memory in this call.
  if type(score) == "string" and score ~= "not enough memory" then
    score = transient("ludo.rubric_error").message(self, failed, score)
  end
  error(score, 0)
end

local function caller(children_first)
  -- rubric(action, observation): see __call. A rubric with hooks has
  -- `_rb_hooks[5]`, ludo.rubric_tree's hooked call, which takes over
  -- before forward, or after it (`ran`) when forward added the first hook.
  local function call(self, action, observation)
    local prev = current
    if prev == nil then return outermost(call, self, action, observation) end
    current = self
    self._rb_stamp = stamp
    local h = self._rb_hooks
    if h then
      local score = h[5](self, action, observation, children_first)
      current = prev
      return score
    end
    local score = self:forward(action, observation)
    if not is_score(score) then
      transient("ludo.rubric_error").bad_score(self, score)
    end
    h = self._rb_hooks
    if h then
      score = h[5](self, action, observation, children_first, true, score)
    else
      self.last_score = score
    end
    current = prev
    return score
  end
  return call
end

-- rubric(action, observation): runs pre-hooks hook(self, action, obs), then
-- forward, stores last_score, runs post-hooks hook(self, action, obs, score)
-- and returns the score. The score is not clamped; anything but a number or
-- nil (no score) raises, naming the rubric (see "Errors" above).
Rubric.__call = caller(false)

-- The call order of OpenEnv's containers (Sequential, Gate, WeightedSum):
-- forward (and so the children) runs first, then the pre-hooks, then
-- last_score is stored and the post-hooks run. Containers install it as
-- their `__call`.
Rubric.children_first_call = caller(true)

-- Returns an iterator over all descendants, depth-first pre-order, as
-- (dotted name, rubric): "code", "code.syntax", "style", ...
--   for name, r in rubric:named_rubrics() do print(name, r.last_score) end
-- `prefix` (optional) is put before every name, joined with a dot. The
-- tree is read when named_rubrics is called (changes made while iterating
-- are not seen). Names are the children's names: the field names of
-- `self.name = SomeRubric()`, the keys of WeightedSum, Sequential, Gate
-- and RubricDict, or rubric_0, rubric_1, ... for positional children. (The
-- work is done by ludo.rubric_build: a runner asks once per state.)
function Rubric:named_rubrics(prefix)
  return transient("ludo.rubric_build").named_rubrics(self, prefix)
end

-- Returns true when this rubric or any descendant may wait (its class has
-- async = true). Cached; registering a child anywhere invalidates it.
function Rubric:is_async()
  local c, generation = self._rb_async, gen[1]
  if c and c // 2 == generation then return c % 2 == 1 end
  local v = self.async == true
  local list = self._rb_list
  if not v then
    for i = 1, #list do
      if list[i]:is_async() then v = true; break end
    end
  end
  if list ~= none then
    rawset(self, "_rb_async", generation * 2 + (v and 1 or 0))
  end
  return v
end

-- Clears per-episode state, recursively: clears last_score and resets
-- every child. Subclasses with state override it and call
-- `Cls.super.reset(self)`. (It also forgets a rubric call that was stopped
-- without returning, see "Errors" above.)
function Rubric:reset()
  current = nil
  rawset(self, "last_score", nil)
  local list = self._rb_list
  for i = 1, #list do list[i]:reset() end
end

local function lazy_index(cls, k)
  -- The __index of a class made lazy by Rubric.lazy: its metatable holds
  -- the module and the names at [2] and [3]. (`k` is searched in place: a
  -- miss must not make strings, to keep the state's string table small.)
  local meta = getmetatable(cls)
  local names, i = meta[3], type(k) == "string" and 1
  while i do
    local s, e = names:find(k, i, true)
    if s and names:byte(s - 1) == 32 and names:byte(e + 1) == 32 then
      meta.__index = cls.super
      for name, f in next, transient(meta[2]) do rawset(cls, name, f) end
      return cls[k]
    end
    i = s and s + 1
  end
  return cls.super[k]
end

-- Rubric.lazy(cls, module, names): the methods of `cls` named in `names`
-- (" name1 name2 ... ") are the functions in the table of `module` (see
-- class.transient), all installed in `cls` the first time one of them is
-- looked up through it; until then a lookup that misses in `cls` asks a
-- function. Keeps rarely used methods out of a session state. Call it
-- right after extend.
function Rubric.lazy(cls, module, names)
  local meta = {}
  for k, v in next, getmetatable(cls) do meta[k] = v end
  meta[2], meta[3], meta.__index = module, names, lazy_index
  setmetatable(cls, meta)
end

-- The lazily loaded methods of Rubric (see the header).
Rubric.lazy(Rubric, "ludo.rubric_tree", " register_forward_hook \z
  register_forward_pre_hook children named_children rubrics get_rubric \z
  clear_last_scores state_dict load_state_dict add_hidden_child forward \z
  is_callable rubric_args _rb_check_child ")

return Rubric
