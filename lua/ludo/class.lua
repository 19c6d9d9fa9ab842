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
-- method lookup is a chain of plain table lookups. Metamethods (`__call`,
-- `__tostring`, `__len`, ...) are looked up raw by Lua, so each class keeps
-- its own copy: they are copied into a subclass when it is created, and a
-- metamethod a class defines for the first time later is propagated to its
-- existing subclasses (unless they define their own). Re-defining one the
-- class already has (itself or by inheritance) is a plain assignment that
-- existing subclasses do not see: define metamethods before extending.
--
-- A class may replace how raw instances are made by defining
-- `Cls.__new(cls)` (it must return a table whose metatable is `cls` or whose
-- metatable has a raw `__class` field naming `cls`); ludo.rubric does this to
-- give each rubric a per-instance metatable.
local M = {}

local rawget, rawset, setmetatable, getmetatable =
  rawget, rawset, setmetatable, getmetatable
local type, error, pairs, ipairs = type, error, pairs, ipairs
local format = string.format

-- Every class made here, weak so unused classes can be collected.
local classes = setmetatable({}, { __mode = "k" })
-- Direct subclasses of each class, for metamethod propagation.
local subclasses = setmetatable({}, { __mode = "k" })

-- The metamethods copied down the hierarchy. `__index` is not among them:
-- it is always the class itself. `__name` is per class.
local METAMETHODS = {
  "__call", "__tostring", "__len", "__eq", "__lt", "__le", "__concat",
  "__unm", "__add", "__sub", "__mul", "__div", "__mod", "__pow", "__idiv",
  "__band", "__bor", "__bxor", "__shl", "__shr", "__bnot", "__close",
  "__gc", "__mode", "__pairs", "__newindex",
}
local is_metamethod = {}
for _, k in ipairs(METAMETHODS) do is_metamethod[k] = true end
M.METAMETHODS = METAMETHODS

local function propagate(cls, key, value, old)
  -- Pushes a metamethod to subclasses that inherited the previous value.
  local subs = subclasses[cls]
  if subs == nil then return end
  for sub in pairs(subs) do
    if rawget(sub, key) == old then
      rawset(sub, key, value)
      propagate(sub, key, value, old)
    end
  end
end

local function instantiate(cls, ...)
  -- Cls(...): makes a raw instance and runs init on it.
  local obj = cls.__new(cls)
  local init = cls.init
  if init ~= nil then init(obj, ...) end
  return obj
end

local function class_tostring(cls)
  return "class " .. rawget(cls, "__name")
end

local function class_newindex(cls, key, value)
  -- Assignments to a class: metamethods also reach inheriting subclasses.
  if is_metamethod[key] then
    local old = rawget(cls, key)
    rawset(cls, key, value)
    propagate(cls, key, value, old)
  else
    rawset(cls, key, value)
  end
end

local function make_class(name, super)
  local cls = {}
  if super ~= nil then
    for _, k in ipairs(METAMETHODS) do
      local v = rawget(super, k)
      if v ~= nil then cls[k] = v end
    end
  end
  cls.__name = name
  cls.__index = cls
  cls.super = super
  classes[cls] = true
  if super ~= nil then
    local subs = subclasses[super]
    if subs == nil then
      subs = setmetatable({}, { __mode = "k" })
      subclasses[super] = subs
    end
    subs[cls] = true
  end
  return setmetatable(cls, {
    __index = super,
    __call = instantiate,
    __tostring = class_tostring,
    __newindex = class_newindex,
  })
end

-- The root class. Its `init` does nothing; its `__tostring` shows the class
-- name and the instance address ("Name: 0x...").
local Object = make_class("Object", nil)
M.Object = Object

-- Makes a raw instance of `cls`; classes may override this (see the header).
function Object.__new(cls)
  return setmetatable({}, cls)
end

-- Initialises a new instance; subclasses override it. The default does
-- nothing.
function Object.init(self) end -- luacheck: ignore 212

function Object.__tostring(self)
  local cls = M.of(self)
  return format("%s: %p", cls and rawget(cls, "__name") or "?", self)
end

-- Returns a new subclass of `self` named `name` (a non-empty string, shown by
-- tostring and stored in `__name`).
function Object.extend(self, name)
  if not classes[self] then
    error("class.extend: called on something that is not a class "
      .. "(use Base:extend(\"Name\"), with a colon)", 2)
  end
  if type(name) ~= "string" or name == "" then
    error("class.extend: the class name must be a non-empty string, got "
      .. type(name), 2)
  end
  return make_class(name, self)
end

-- Returns true when `x` is a class made by this module.
function M.is_class(x)
  return classes[x] == true
end

-- Returns the class of `obj`, or nil when `obj` is not an instance of one.
function M.of(obj)
  local mt = getmetatable(obj)
  if type(mt) ~= "table" then return nil end
  if classes[mt] then return mt end
  local cls = rawget(mt, "__class")
  if cls ~= nil and classes[cls] then return cls end
  return nil
end

-- Returns true when `obj` is an instance of `cls` or of a subclass of it.
function M.is_instance(obj, cls)
  if not classes[cls] then
    error("class.is_instance: second argument is not a class", 2)
  end
  local c = M.of(obj)
  while c ~= nil do
    if c == cls then return true end
    c = rawget(c, "super")
  end
  return false
end

-- Returns true when class `sub` is `cls` or inherits from it.
function M.is_subclass(sub, cls)
  if not classes[sub] or not classes[cls] then return false end
  local c = sub
  while c ~= nil do
    if c == cls then return true end
    c = rawget(c, "super")
  end
  return false
end

return M
