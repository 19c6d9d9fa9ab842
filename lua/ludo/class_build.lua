-- ludo.class_build: what ludo.class runs only when classes are made or
-- changed: extend and the propagation of metamethods. Loaded transiently
-- by ludo.class (class.transient), so an idle state does not hold it.
local class = require("ludo.class")

local rawget, rawset, getmetatable, setmetatable, type, error, next =
  rawget, rawset, getmetatable, setmetatable, type, error, next

-- ludo.class keeps its internals in the metatable of Object: the function
-- that instantiates every class (__call) and `metas` (at [1]).
local omt = getmetatable(class.Object)
local instantiate, metas = omt.__call, omt[1]

local B = {}

local function copied(k)
  -- The keys each class keeps its own copy of (see ludo.class).
  return type(k) == "string" and k:byte() == 95 and k:byte(2) == 95
    and k ~= "__index" and k ~= "__name" and k ~= "__new"
end

-- Base:extend(name) (class.Object.extend): a new subclass of `self`.
function B.extend(self, name)
  local smt = getmetatable(self)
  if type(smt) ~= "table" or rawget(smt, "__call") ~= instantiate then
    error("class.extend: called on something that is not a class \z
      (use Base:extend(\"Name\"), with a colon)", 2)
  end
  if type(name) ~= "string" or name == "" then
    error("class.extend: the class name must be a non-empty string, got "
      .. type(name), 2)
  end
  local cls = { __name = name, super = self }
  cls.__index = cls
  for k, v in next, self do
    if copied(k) then cls[k] = v end
  end
  local mt = metas[self]
  if mt == nil then
    mt = { setmetatable({}, getmetatable(metas)), __index = self,
      __call = instantiate, __tostring = omt.__tostring,
      __newindex = omt.__newindex }
    metas[self] = mt
  end
  mt[1][cls] = true
  return setmetatable(cls, mt)
end

-- B[1](cls, key, value, old): pushes a metamethod assigned to class `cls`
-- to its subclasses that inherited the value it replaces, recursively.
local function propagate(cls, key, value, old)
  local mt = metas[cls]
  if mt == nil then return end
  for sub in next, mt[1] do
    if rawget(sub, key) == old then
      rawset(sub, key, value)
      propagate(sub, key, value, old)
    end
  end
end
B[1] = propagate

-- Loaded through class.transient (see ludo.class).
return B
