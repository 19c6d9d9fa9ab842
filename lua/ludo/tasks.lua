-- ludo.tasks: finding an environment's tasks (OpenEnv's Task API,
-- OPENENV.md 1.9; docs/environments.md "Tasks"), and the choice of a task
-- at reset. The C core loads it into a session's state the first time the
-- session needs it (a reset naming a split, or a tasks call), only for
-- environments that declare `tasks` (ludo.envinfo checked the declaration
-- at load), and binds it to them with M.bind(decl, raise, name):
--   select(opts): a reset's options; with "split" and "index" the task at
--     that index becomes opts.task;
-- and the lookups ludo.tasks_api builds the tasks calls on (kept apart so
-- that sessions which only select tasks do not hold the calls' code).
-- `decl` is the module's `tasks` table: splits (a list or a function),
-- and any of list(split), count(split), get(split, index),
-- range(split, start, stop). Indices count from 0, as on the wire.
-- Failures are raised through `raise(code, text, 0)`, the C core's raiser:
-- ESCHEMA (a bad selection, an unknown split), EVALUE (a function returned
-- what it may not). The module keeps no state: every call reads `decl`
-- anew.
local json = require("ludo.json")
local null = require("ludo.null")

local M = {}

local type, format = type, string.format

local ARRAY = getmetatable(json.array())

-- The JSON type of a value, for messages ("expected integer, got string").
function M.json_type(v)
  if v == null then return "null" end
  local t = type(v)
  if t == "number" then
    return math.type(v) == "integer" and "integer" or "number"
  elseif t == "table" then
    return (getmetatable(v) == ARRAY or v[1] ~= nil) and "array" or "object"
  end
  return t
end
local json_type = M.json_type

-- Whether v is a table a list can be: a sequence, or empty.
function M.listlike(v)
  return type(v) == "table" and (next(v) == nil or v[1] ~= nil)
end
local listlike = M.listlike

-- A whole number (an integer, or a float without a fraction), else nil.
function M.whole(v)
  if type(v) == "number" then return math.tointeger(v) end
  return nil
end
local whole = M.whole

-- JSON null and a missing field are the same.
function M.given(v)
  if v == null then return nil end
  return v
end
local given = M.given

function M.quoted(s) return "'" .. s .. "'" end
local quoted = M.quoted

-- The splits as declared (a list of names, or of tables with a name),
-- checked; the name of each is entry.name or the entry.
function M.split_list(decl, raise)
  local list, what = decl.splits, "tasks.splits"
  if type(list) ~= "table" then
    list, what = list(), "tasks.splits()"
    if not listlike(list) then
      raise("EVALUE", what .. " must return a list of splits, got "
        .. json_type(list), 0)
    end
  end
  for i = 1, #list do
    local s = list[i]
    if type(s) ~= "string" and (type(s) ~= "table"
      or type(s.name) ~= "string") then
      raise("EVALUE", format("%s[%d] must be a split name or a table with "
        .. "a name, got %s", what, i, json_type(s)), 0)
    end
  end
  return list
end

-- Raises ESCHEMA, naming `field`, unless `split` is one of the splits.
function M.known(decl, split, raise, field)
  local names = {}
  for i, s in ipairs(M.split_list(decl, raise)) do
    local name = type(s) == "table" and s.name or s
    if name == split then return end
    if i <= 10 then names[i] = name end
  end
  local all = #names == 0 and "there are none"
    or "the splits are: " .. table.concat(names, ", ")
  raise("ESCHEMA", format("%s: unknown split %s (%s)", field, quoted(split),
    all), 0)
end

-- The environment's own list of a split's tasks.
function M.own_list(decl, split, raise)
  local l = decl.list(split)
  if not listlike(l) then
    raise("EVALUE", format("tasks.list(%s) must return a list of tasks, "
      .. "got %s", quoted(split), json_type(l)), 0)
  end
  return l
end

-- The number of tasks in a split, or nil when nothing can tell it.
function M.count(decl, split, raise)
  if decl.count then
    local v = decl.count(split)
    local n = whole(v)
    if n == nil or n < 0 then
      raise("EVALUE", format("tasks.count(%s) must return a whole number "
        .. ">= 0, got %s", quoted(split),
        type(v) == "number" and tostring(v) or json_type(v)), 0)
    end
    return n
  end
  if decl.list then return #M.own_list(decl, split, raise) end
  return nil
end

-- The task at `index` (a whole number >= 0), or nil when there is none.
function M.get(decl, split, index, raise)
  if decl.get then
    if decl.count and index >= M.count(decl, split, raise) then
      return nil
    end
    return decl.get(split, index)
  end
  return M.own_list(decl, split, raise)[index + 1]
end

local function select(decl, opts, raise)
  local split, index = given(opts.split), given(opts.index)
  if split == nil and index == nil then return end
  if split == nil then
    raise("ESCHEMA", "reset.split: required with reset.index (the split "
      .. "the index counts in)", 0)
  end
  if type(split) ~= "string" then
    raise("ESCHEMA", "reset.split: expected string, got " .. json_type(split),
      0)
  end
  M.known(decl, split, raise, "reset.split")
  if index == nil then return end
  local i = whole(index)
  if i == nil then
    raise("ESCHEMA", "reset.index: expected integer, got "
      .. json_type(index), 0)
  end
  if given(opts.task) ~= nil then
    raise("ESCHEMA", "reset.task: the task is the one split and index "
      .. "select; send one or the other", 0)
  end
  local task = i >= 0 and M.get(decl, split, i, raise) or nil
  if task == nil then
    raise("ESCHEMA", format("reset.index: no task at index %d of split %s",
      i, quoted(split)), 0)
  end
  opts.index, opts.task = i, task
end

-- `decl` is the module's tasks, `raise` the C core's raiser, `name` the
-- environment's name (for messages); ludo.tasks_api finds them, and this
-- module's lookups (M.count(decl, split, raise), ...), in the result.
function M.bind(decl, raise, name)
  return {
    lib = M, decl = decl, raise = raise, name = name,
    select = function(opts) return select(decl, opts, raise) end,
  }
end

return M
