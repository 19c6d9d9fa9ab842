-- rubrics.rubric_list: RubricList, an ordered list of rubrics.
--
--   local RubricList = require("rubrics.rubric_list")
--   local l = RubricList({a, b}); l:append(c)
--   for i, r in ipairs(l) do ... end
--
-- A container only: it registers its items as children (rubric_0.., so
-- they appear in named_rubrics and are reset and saved with the tree) but
-- does not aggregate; calling it raises, as OpenEnv's NotImplementedError.
-- Lua access is 1-based: l[i], l:get(i), #l, l:len(), ipairs(l), l:iter().
-- Items are positional only: a table with names is refused (RubricDict
-- keeps rubrics by name).
local Rubric = require("ludo.rubric")

local error, type, format = error, type, string.format

local RubricList = Rubric:extend("RubricList")

local function named_items(who, t, level)
  -- Raises at `level` + 1 when array `t` has keys other than 1..#t.
  local n = #t
  for k in next, t do
    if math.type(k) ~= "integer" or k < 1 or k > n then
      error(format("%s: expected an array of rubrics, got a table with the \z
        key %s (for rubrics by name use RubricDict)", who,
        type(k) == "string" and format("%q", k) or tostring(k)), level + 1)
    end
  end
end

-- RubricList(rubrics?): `rubrics` is an optional array of rubrics.
function RubricList:init(rubrics)
  if rubrics ~= nil then
    if type(rubrics) ~= "table" or Rubric.is_rubric(rubrics) then
      error("RubricList: the argument must be an array of rubrics", 3)
    end
    named_items("RubricList", rubrics, 3)
    local list, n = Rubric.rubric_args("RubricList", 4, rubrics)
    for i = 1, n do self:add_child("rubric_" .. (i - 1), list[i]) end
  end
end

-- Appends `rubric` as child rubric_<len>. Returns the list.
function RubricList:append(rubric)
  if not Rubric.is_rubric(rubric) then
    error("RubricList.append: expected a Rubric, got " .. type(rubric), 2)
  end
  self:add_child("rubric_" .. #self._rb_list, rubric)
  return self
end

-- Appends every rubric of array `rubrics`. Returns the list.
function RubricList:extend(rubrics)
  if type(rubrics) ~= "table" or Rubric.is_rubric(rubrics) then
    error("RubricList.extend: expected an array of rubrics", 2)
  end
  named_items("RubricList.extend", rubrics, 2)
  local list, n = Rubric.rubric_args("RubricList.extend", 2, rubrics)
  for i = 1, n do self:add_child("rubric_" .. #self._rb_list, list[i]) end
  return self
end

-- Returns the number of rubrics (also #l).
function RubricList:len()
  return #self._rb_list
end

RubricList.__len = RubricList.len

-- Returns the i-th rubric (1-based), or nil (also l[i]).
function RubricList:get(i)
  return self._rb_list[i]
end

-- Returns an iterator over (i, rubric), like ipairs(l).
function RubricList:iter()
  return ipairs(self._rb_list)
end

function RubricList:forward() -- luacheck: ignore 212
  error(format("RubricList.forward() is not implemented. RubricList is a "
    .. "container: iterate over its rubrics and combine their scores "
    .. "yourself, or use WeightedSum or Sequential."), 0)
end

return RubricList
