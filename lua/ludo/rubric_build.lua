-- ludo.rubric_build: the work of Rubric:add_child (checks, the view, the
-- registration), which runs only while a rubric tree is built, the error
-- of a bad named_rubrics prefix and pairs() of ludo.rubrics. Loaded
-- transiently (see ludo.class's transient), so an idle session state does
-- not hold this code.
local Rubric = require("ludo.rubric")

local type, error, getmetatable, setmetatable, rawget, rawset, next =
  type, error, getmetatable, setmetatable, rawget, rawset, next

local B = {}

-- True when `target` is `root` or one of its descendants (also used by
-- ludo.rubric_tree's error path).
local function contains(root, target, seen)
  if root == target then return true end
  if seen[root] then return false end
  seen[root] = true
  local list = root._rb_list
  for i = 1, #list do
    if contains(list[i], target, seen) then return true end
  end
  return false
end

-- Rubric.add_child's work (see ludo.rubric, which counts the registration
-- once this returns): checks (errors are raised at `level`, default 2,
-- counted from ludo.rubric's add_child); makes the rubric's own tables and
-- view on its first child; registers `child` under `name`, replacing a
-- child of that name in place; `hidden` keeps it out of the fields.
function B.add_child(self, name, child, hidden, level)
  local mt = getmetatable(self)
  local list = rawget(self, "_rb_list")
  local cls = list and getmetatable(mt) or mt
  -- Names starting with "_" and all errors: Rubric._rb_check_child.
  if type(name) ~= "string" or name == "" or name:byte() == 95
    or name:find(".", 1, true) or not Rubric.is_rubric(child)
    or not hidden and type(cls[name]) == "function"
    or contains(child, self, {}) then
    Rubric._rb_check_child(self, name, child, hidden, level)
  end
  local map
  if list == nil then
    if mt == cls then
      -- The view: the class's metamethods, `__index` = itself.
      mt = {}
      for k, v in next, cls do
        if type(k) == "string" and k:byte() == 95 and k:byte(2) == 95 then
          mt[k] = v
        end
      end
      mt.__index = mt
      setmetatable(self, setmetatable(mt, cls))
    end
    list, map = {}, {}
    rawset(self, "_rb_list", list)
    rawset(self, "_rb_map", map)
  else
    map = self._rb_map
  end
  local pos = #map + 1
  if map[name] == nil then
    map[pos] = name
  else
    for i = 1, pos - 1 do
      if map[i] == name then pos = i; break end
    end
  end
  list[pos] = child
  map[name] = child
  if not hidden then
    rawset(mt, name, child)
    rawset(mt, pos, child)
  end
end

-- Raises the error of a bad named_rubrics prefix (for ludo.rubric).
function B.named_rubrics(prefix)
  error("named_rubrics: prefix must be a string, got " .. type(prefix), 3)
end

-- pairs(R) for ludo.rubrics: loads every class (`modules` is its list of
-- " Class module" entries), then iterates.
function B.pairs(t, modules)
  local a, is_class = 2, true
  while a < #modules do
    local b = modules:find(" ", a, true)
    if is_class then local _ = t[modules:sub(a, b - 1)] end
    a, is_class = b + 1, not is_class
  end
  return next, t, nil
end

-- Loaded through class.transient (see ludo.class).
B.contains = contains

return B
