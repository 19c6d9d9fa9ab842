-- ludo.class_query: the class queries of ludo.class (class.is_class, ...),
-- which behave as if defined in ludo.class and are documented here, and
-- tostring of a class. Loaded transiently by ludo.class (class.transient).
local class = require("ludo.class")

local rawget, getmetatable, type, error =
  rawget, getmetatable, type, error

-- The function that instantiates every class (see ludo.class).
local instantiate = getmetatable(class.Object).__call

local Q = {}

-- Returns true when `x` is a class made by ludo.class.
local function is_class(x)
  local mt = getmetatable(x)
  return type(mt) == "table" and rawget(mt, "__call") == instantiate
end
Q.is_class = is_class

-- Returns the class of `obj`, or nil when `obj` is not an instance of one.
function Q.of(obj)
  local mt = getmetatable(obj)
  if is_class(mt) then return mt end
  if type(mt) ~= "table" then return nil end
  -- A rubric's own metatable (its "view") has its class as metatable.
  local cls = getmetatable(mt)
  if rawget(mt, "__index") == mt and is_class(cls) then return cls end
  return nil
end

local function inherits(c, cls)
  while c ~= nil do
    if c == cls then return true end
    c = rawget(c, "super")
  end
  return false
end

-- Returns true when `obj` is an instance of `cls` or of a subclass of it.
function Q.is_instance(obj, cls)
  if not is_class(cls) then
    error("class.is_instance: second argument is not a class", 2)
  end
  return inherits(Q.of(obj), cls)
end

-- Returns true when class `sub` is `cls` or inherits from it.
function Q.is_subclass(sub, cls)
  return is_class(sub) and is_class(cls) and inherits(sub, cls)
end

-- tostring(Cls): "class Name".
function Q.tostring(cls)
  return "class " .. rawget(cls, "__name")
end

-- Loaded through class.transient (see ludo.class).
return Q
