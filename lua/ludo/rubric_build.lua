-- ludo.rubric_build: the work of Rubric:add_child (checks, the view, the
-- registration), which runs only while a rubric tree is built, the reading
-- of named children given to containers (entries, sequential, gate),
-- named_rubrics and pairs() of ludo.rubrics. Loaded
-- transiently (see ludo.class's transient), so an idle session state does
-- not hold this code.
local Rubric = require("ludo.rubric")

local type, error, getmetatable, setmetatable, rawget, rawset, next =
  type, error, getmetatable, setmetatable, rawget, rawset, next
local format, sort, tostring = string.format, table.sort, tostring
local is_rubric = Rubric.is_rubric

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

-- The first key of table `t` that is not one of 1..#t, or nil.
local function extra_key(t)
  local n = #t
  for k in next, t do
    if math.type(k) ~= "integer" or k < 1 or k > n then return k end
  end
end
B.extra_key = extra_key

-- Raises `who`'s error for a table of children that mixes positions and
-- names, at `level` + 1.
local function mixed(who, k, level)
  error(format("%s: the table of rubrics mixes positions (1, 2, ...) and \z
    names (%s); give an array or a map of name = rubric, not both", who,
    type(k) == "string" and format("%q", k) or tostring(k)), level + 1)
end
B.mixed = mixed

-- Reads named children given to a container as table `t`, for the forms
-- other than an array of rubrics:
--   an array of records {name, rubric} (`width` 2) or {name, rubric,
--   weight} (`width` 3), kept in that order;
--   a map name = rubric, in sorted name order (a Lua table has no order of
--   its own), unless `order` is given: then a map is refused with `order`
--   as the reason.
-- Returns names, rubrics and (width 3) the records' third fields, and
-- whether `t` was a map. Errors name `who` and are raised at `level`.
function B.entries(who, t, width, order, level)
  level = level + 1
  local n, names, list, extra = #t, {}, {}, {}
  local form = width == 3 and "{name, rubric, weight}" or "{name, rubric}"
  if n == 0 and next(t) ~= nil then
    if order then
      error(format("%s: a map of name = rubric has no order; %s: pass an \z
        array of %s records instead", who, order, form), level)
    end
    for k, v in next, t do
      if type(k) ~= "string" then
        error(format("%s: the names of a map of rubrics must be strings, \z
          got %s", who, type(k)), level)
      end
      if not is_rubric(v) then
        error(format("%s: %q is not a Rubric (got %s)", who, k, type(v)),
          level)
      end
      names[#names + 1] = k
    end
    sort(names)
    for i = 1, #names do list[i] = t[names[i]] end
    return names, list, nil, true
  end
  local k = extra_key(t)
  if k ~= nil then mixed(who, k, level) end
  local seen = {}
  for i = 1, n do
    local rec = t[i]
    if type(rec) ~= "table" or is_rubric(rec) then
      error(format("%s: item %d must be a %s record like item 1, got %s",
        who, i, form, is_rubric(rec) and "a Rubric" or type(rec)), level)
    end
    local name, r = rec[1], rec[2]
    if type(name) ~= "string" then
      error(format("%s: item %d: the name (field 1 of %s) must be a \z
        string, got %s", who, i, form, type(name)), level)
    end
    if not is_rubric(r) then
      error(format("%s: item %d (%q): field 2 must be a Rubric, got %s",
        who, i, name, type(r)), level)
    end
    if #rec ~= width or extra_key(rec) ~= nil then
      error(format("%s: item %d (%q) must have exactly the fields %s",
        who, i, name, form), level)
    end
    if seen[name] then
      error(format("%s: the name %q is given twice", who, name), level)
    end
    seen[name] = true
    names[i], list[i], extra[i] = name, r, rec[3]
  end
  return names, list, width == 3 and extra or nil, false
end

-- Sequential's init when its arguments are not all rubrics (`list` holds
-- the `n` arguments, or the array given alone): {name, rubric} records,
-- or an error raised at `level`.
function B.sequential(self, list, n, level)
  level = level + 1
  local first = list[1]
  if n > 0 and (type(first) ~= "table" or is_rubric(first)) then
    -- Rubrics by position: one of them is not a rubric.
    if type(first) == "string" and is_rubric(list[2]) and n == 2 then
      error(format("Sequential: argument 1 is not a Rubric (got string); \z
        for one named child write Sequential{{%q, rubric}}", first), level)
    end
    for i = 1, n do
      if not is_rubric(list[i]) then
        error(format("Sequential: argument %d is not a Rubric (got %s)", i,
          type(list[i])), level)
      end
    end
    local k = extra_key(list)
    if k ~= nil then mixed("Sequential", k, level) end
  end
  local names, rubrics = B.entries("Sequential", list, 2, "Sequential \z
    runs its children in order", level)
  for i = 1, #rubrics do
    Rubric.add_child(self, names[i], rubrics[i], false, level + 1)
  end
end

-- Gate's init when its first argument is not a rubric: {name = rubric}
-- names the child; anything else is an error raised at `level`.
function B.gate(self, arg, level)
  level = level + 1
  local name, r = nil, nil
  if type(arg) == "table" and #arg == 0 then name, r = next(arg) end
  if type(name) ~= "string" or not is_rubric(r) or next(arg, name) then
    error("Gate: first argument must be a Rubric or {name = rubric}, got "
      .. (type(arg) == "table" and "another table" or type(arg)), level)
  end
  Rubric.add_child(self, name, r, false, level + 1)
end

local function collect(r, prefix, names, objs)
  -- Appends r's descendants to names/objs, depth-first pre-order.
  local map, list = r._rb_map, r._rb_list
  for i = 1, #list do
    local child, full = list[i], map[i]
    if prefix then full = prefix .. "." .. full end
    local n = #objs + 1
    names[n], objs[n] = full, child
    collect(child, full, names, objs)
  end
end

-- Rubric:named_rubrics(prefix) (see ludo.rubric, which tail-calls this).
function B.named_rubrics(self, prefix)
  if prefix == "" then
    prefix = nil
  elseif prefix ~= nil and type(prefix) ~= "string" then
    error("named_rubrics: prefix must be a string, got " .. type(prefix), 2)
  end
  local names, objs, i = {}, {}, 0
  collect(self, prefix, names, objs)
  return function()
    i = i + 1
    local r = objs[i]
    if r ~= nil then return names[i], r end
  end
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
