-- ludo.class: a tiny single-inheritance class helper.
--
--   local class = require("ludo.class")
--   local Animal = class.Object:extend("Animal")
--   function Animal:init(name) self.name = name end
--   local Dog = Animal:extend("Dog")
--   function Dog:init(name) Dog.super.init(self, name); self.sound = "woof" end
--   local d = Dog("rex")            -- calls Dog.init(d, "rex")
--   class.is_instance(d, Animal)    --> true
--   tostring(d)                     --> "Dog: 0x..."
--
-- A class is a table. It is the metatable of its instances (`Cls.__index` is
-- `Cls` itself) and its own metatable's `__index` is its superclass, so a
-- method lookup is a chain of plain table lookups. Metamethods are looked
-- up raw by Lua, so each class keeps its own copy of every `__`-prefixed
-- key (`__call`, `__len`, `__newindex`, ...; not `__index`, `__name` and
-- `__new`, which are per class or looked up through the chain): they are
-- copied into a subclass when it is created, and one assigned to a class
-- later is propagated to its existing subclasses that inherited the value
-- it replaces (so define metamethods before extending, or re-define them
-- on the base). `tostring(instance)` is "Name: 0x..." (Lua's own format
-- for a metatable with `__name`) unless a class defines `__tostring`.
--
-- A class may replace how raw instances are made by defining
-- `Cls.__new(cls)` (it must return a table whose metatable is `cls`, or is
-- a table with `__index` = itself and `cls` as its metatable, like a
-- rubric's view); ludo.rubric does this.
--
-- Code size is paid by every Lua state that loads this module, so the code
-- that only runs when classes are made (extend, metamethod propagation)
-- lives in ludo.class_build, and the queries (is_class, of, is_instance,
-- is_subclass) and tostring(Cls) in ludo.class_query, both loaded
-- transiently (see M.transient) when one of them runs: an idle state does
-- not hold them.
local M = {}

local weak = { __mode = "k" }
-- The metatable shared by the direct subclasses of each class (by class);
-- its [1] is the weak set of those subclasses, for propagation.
local metas = setmetatable({}, weak)

-- Modules loaded by transient() (module table -> name), while something
-- still uses them.
local cache = setmetatable({}, weak)

-- transient(name): returns module `name` without keeping it loaded: it is
-- required and at once dropped from package.loaded, so its code is freed by
-- the collection after the last use and loaded again when needed. Rarely
-- run code (building trees, errors, queries) lives in such modules so that
-- it takes no memory in every session state. (ludo's sandbox offers
-- package.loaded, as a stock Lua does.)
local function transient(name)
  for m, n in next, cache do
    if n == name then return m end
  end
  local m = require(name)
  local loaded = package and package.loaded
  if loaded then loaded[name] = nil end
  cache[m] = name
  return m
end
M.transient = transient

local function copied(k)
  -- True for the keys each class keeps its own copy of (see the header).
  return type(k) == "string" and k:byte() == 95 and k:byte(2) == 95
    and k ~= "__index" and k ~= "__name" and k ~= "__new"
end

local function instantiate(cls, ...)
  -- Cls(...): makes a raw instance and runs init on it.
  local new = cls.__new
  local obj = new and new(cls) or setmetatable({}, cls)
  cls.init(obj, ...)
  return obj
end

local function class_tostring(cls)
  -- tostring(Cls) is "class Name".
  return transient("ludo.class_query").tostring(cls)
end

local function class_newindex(cls, key, value)
  -- Assignments to a class: metamethods also reach inheriting subclasses
  -- (ludo.class_build does that, when there are any).
  local old = rawget(cls, key)
  rawset(cls, key, value)
  if metas[cls] and copied(key) then
    transient("ludo.class_build")[1](cls, key, value, old) -- propagate
  end
end

-- The root class. Its `init` does nothing. (Its metatable, whose functions
-- every class's metatable shares, also holds `metas` at [1] for
-- ludo.class_build.)
local Object = setmetatable({ __name = "Object" }, {
  metas, __call = instantiate, __tostring = class_tostring,
  __newindex = class_newindex,
})
Object.__index = Object
M.Object = Object

-- Initialises a new instance; subclasses override it. The default does
-- nothing.
function Object.init() end

-- Returns a new subclass of `self` named `name` (a non-empty string, shown by
-- tostring and stored in `__name`).
function Object.extend(self, name)
  return transient("ludo.class_build").extend(self, name)
end

return setmetatable(M, {
  __index = function(_, k) return transient("ludo.class_query")[k] end,
})
