-- rubrics.rubric_dict: RubricDict, rubrics by key, in insertion order.
--
--   local RubricDict = require("rubrics.rubric_dict")
--   local d = RubricDict({{"code", Compiles()}, {"style", Style()}})
--   d:set("tests", PassesTests())
--   d:get("code"); d:has("style"); for _, k in ipairs(d:keys()) do ... end
--
-- Keys are child names (they appear in named_rubrics as "code", ...).
-- Unlike OpenEnv, keys never shadow methods: entries are reached through
-- get/set/has/keys/values/items and are not fields, so a key named "keys"
-- or "get" is fine. Keys are non-empty strings without dots. Initial
-- content is an array of {key, rubric} pairs (kept in that order) or a map
-- {key = rubric} (added in sorted key order, since Lua maps are unordered).
-- A container only: calling it raises, as OpenEnv's NotImplementedError.
local Rubric = require("ludo.rubric")

local error, type, format, pairs, sort =
  error, type, string.format, pairs, table.sort

local RubricDict = Rubric:extend("RubricDict")

local function add_all(self, content, who, level)
  -- Adds pairs or a map, see the header.
  if type(content) ~= "table" or Rubric.is_rubric(content) then
    error(who .. ": expected an array of {key, rubric} pairs or a map "
      .. "of key = rubric", level + 1)
  end
  if #content > 0 then
    local k = require("ludo.class").transient("ludo.rubric_build")
      .extra_key(content)
    if k ~= nil then
      error(format("%s: the table mixes {key, rubric} pairs and keys (%s); \z
        give one form", who, type(k) == "string" and format("%q", k)
        or tostring(k)), level + 1)
    end
    for i = 1, #content do
      local p = content[i]
      if type(p) ~= "table" or Rubric.is_rubric(p) then
        error(format("%s: item %d must be a {key, rubric} pair", who, i),
          level + 1)
      end
      self:set(p[1], p[2])
    end
    return
  end
  local keys = {}
  for k in pairs(content) do
    if type(k) ~= "string" then
      error(format("%s: keys must be strings, got %s", who, type(k)),
        level + 1)
    end
    keys[#keys + 1] = k
  end
  sort(keys)
  for i = 1, #keys do self:set(keys[i], content[keys[i]]) end
end

-- RubricDict(content?): see the header for the accepted forms.
function RubricDict:init(content)
  if content ~= nil then add_all(self, content, "RubricDict", 3) end
end

-- Sets `key` to `rubric` (a new key goes last; an existing one keeps its
-- place). Returns the dict.
function RubricDict:set(key, rubric)
  if type(key) ~= "string" then
    error("RubricDict.set: key must be a string, got " .. type(key), 2)
  end
  if not Rubric.is_rubric(rubric) then
    error(format("RubricDict.set: value for %q must be a Rubric, got %s",
      key, type(rubric)), 2)
  end
  self:add_hidden_child(key, rubric)
  return self
end

-- Returns the rubric at `key`, or nil.
function RubricDict:get(key)
  if type(key) == "string" then return self._rb_map[key] end
end

-- Returns true when `key` is present.
function RubricDict:has(key)
  return type(key) == "string" and self._rb_map[key] ~= nil
end

-- Returns the number of entries (also #d).
function RubricDict:len()
  return #self._rb_list
end

RubricDict.__len = RubricDict.len

-- Returns the keys in insertion order (a new array).
function RubricDict:keys()
  local names, out = self._rb_map, {}
  for i = 1, #self._rb_list do out[i] = names[i] end
  return out
end

-- Returns the rubrics in insertion order (a new array).
function RubricDict:values()
  return self:children()
end

-- Returns {key, rubric} pairs in insertion order (a new array).
function RubricDict:items()
  local names, list, out = self._rb_map, self._rb_list, {}
  for i = 1, #list do out[i] = { names[i], list[i] } end
  return out
end

-- Adds entries from pairs or a map (see the header). Returns the dict.
function RubricDict:update(content)
  add_all(self, content, "RubricDict.update", 2)
  return self
end

-- Returns an iterator over (key, rubric) in insertion order; pairs(d) does
-- the same.
function RubricDict:iter()
  local names, list, i = self._rb_map, self._rb_list, 0
  return function()
    i = i + 1
    local r = list[i]
    if r ~= nil then return names[i], r end
  end
end

RubricDict.__pairs = function(self) return self:iter() end

function RubricDict:forward() -- luacheck: ignore 212
  error("RubricDict.forward() is not implemented. RubricDict is a "
    .. "container: look up its rubrics by key and combine their scores "
    .. "yourself, or use WeightedSum or Sequential.", 0)
end

return RubricDict
