-- ludo.tasks: an environment's tasks (OpenEnv's Task API, OPENENV.md 1.9;
-- docs/environments.md "Tasks"). The C core loads it only into the states
-- of environments that declare `tasks` (ludo.envinfo checked the
-- declaration at load) and ludo.runner calls it for two things:
--   M.call(decl, request, raise, name): a tasks call (ludo_session_tasks):
--     {"method": "splits" | "list" | "count" | "get" | "range", ...};
--     returns the result's JSON text.
--   M.select(decl, opts, raise): a reset's options; with "split" and
--     "index" the task at that index becomes opts.task.
-- `decl` is the module's `tasks` table: splits (a list or a function),
-- and any of list(split), count(split), get(split, index),
-- range(split, start, stop). What it does not give is derived from what
-- it gives: count from list, get from list, list and range from get and
-- count, or from list. Indices count from 0, as on the wire; range's
-- start and stop follow Python's slices. Failures are raised through
-- `raise(code, text, 0)`, the C core's raiser: ESCHEMA (a malformed
-- request, an unknown split), ENOTSUP (nothing to answer with), ERANGE (no
-- task at an index), EVALUE (a function returned what a task list cannot
-- hold). The module keeps no state: every call reads `decl` anew.
local json = require("ludo.json")
local null = require("ludo.null")

local M = {}

local type, tostring, format = type, tostring, string.format

-- Split names that keep their own type; any other is a validation split.
local TYPES = { train = true, validation = true, test = true }

local ARRAY = getmetatable(json.array())

-- The JSON type of a value, for messages ("expected integer, got string").
local function json_type(v)
  if v == null then return "null" end
  local t = type(v)
  if t == "number" then
    return math.type(v) == "integer" and "integer" or "number"
  elseif t == "table" then
    return (getmetatable(v) == ARRAY or v[1] ~= nil) and "array" or "object"
  end
  return t
end

-- Whether v is a table a list can be: a sequence, or empty.
local function listlike(v)
  return type(v) == "table" and (next(v) == nil or v[1] ~= nil)
end

-- A number as itself, anything else by its type.
local function show(v)
  if type(v) == "number" then return tostring(v) end
  return json_type(v)
end

-- A whole number (an integer, or a float without a fraction), else nil.
local function whole(v)
  if type(v) == "number" then return math.tointeger(v) end
  return nil
end

-- JSON null and a missing field are the same.
local function given(v)
  if v == null then return nil end
  return v
end

local function quoted(s) return "'" .. s .. "'" end

-- ---- the environment's functions -----------------------------------------

-- The splits, as {name, type} tables: a name is its own type when it is
-- train, validation or test, else "validation" (OpenEnv's rule); a table
-- keeps its fields, its type defaulting by the same rule.
local function splits(decl, raise)
  local list, what = decl.splits, "tasks.splits"
  if type(list) ~= "table" then
    list, what = list(), "tasks.splits()"
    if not listlike(list) then
      raise("EVALUE", what .. " must return a list of splits, got "
        .. json_type(list), 0)
    end
  end
  local out = json.array()
  for i = 1, #list do
    local s, e = list[i], nil
    if type(s) == "string" then
      e = { name = s, type = TYPES[s] and s or "validation" }
    elseif type(s) == "table" and type(s.name) == "string" then
      e = {}
      for k, v in pairs(s) do e[k] = v end
      if e.type == nil then
        e.type = TYPES[s.name] and s.name or "validation"
      end
    else
      raise("EVALUE", format("%s[%d] must be a split name or a table with a "
        .. "name, got %s", what, i, json_type(s)), 0)
    end
    out[i] = e
  end
  return out
end

-- Raises ESCHEMA, naming `field`, unless `split` is one of the splits.
local function known(decl, split, raise, field)
  local names = {}
  for i, s in ipairs(splits(decl, raise)) do
    if s.name == split then return end
    if i <= 10 then names[i] = s.name end
  end
  local all = #names == 0 and "there are none"
    or "the splits are: " .. table.concat(names, ", ")
  raise("ESCHEMA", format("%s: unknown split %s (%s)", field, quoted(split),
    all), 0)
end

-- The environment's own list of a split's tasks.
local function own_list(decl, split, raise)
  local l = decl.list(split)
  if not listlike(l) then
    raise("EVALUE", format("tasks.list(%s) must return a list of tasks, "
      .. "got %s", quoted(split), json_type(l)), 0)
  end
  return l
end

-- The number of tasks in a split, or nil when nothing can tell it.
local function count(decl, split, raise)
  if decl.count then
    local v = decl.count(split)
    local n = whole(v)
    if n == nil or n < 0 then
      raise("EVALUE", format("tasks.count(%s) must return a whole number "
        .. ">= 0, got %s", quoted(split), show(v)), 0)
    end
    return n
  end
  if decl.list then return #own_list(decl, split, raise) end
  return nil
end

-- The task at `index` (a whole number >= 0), or nil when there is none.
local function get(decl, split, index, raise)
  if decl.get then
    if decl.count and index >= count(decl, split, raise) then return nil end
    return decl.get(split, index)
  end
  return own_list(decl, split, raise)[index + 1]
end

-- Tasks i .. j-1 fetched one by one with get; count said they exist.
local function by_get(decl, split, i, j, raise)
  local out = json.array()
  for k = i, j - 1 do
    local t = decl.get(split, k)
    if t == nil then
      raise("EVALUE", format("tasks.get(%s, %d) returned nil below "
        .. "tasks.count(%s)", quoted(split), k, quoted(split)), 0)
    end
    out[#out + 1] = t
  end
  return out
end

-- Python's slice bounds of [start:stop] over n items.
local function bounds(n, start, stop)
  local function at(i, default)
    if i == nil then return default end
    if i < 0 then i = i + n end
    if i < 0 then return 0 end
    if i > n then return n end
    return i
  end
  return at(start, 0), at(stop, n)
end

-- All of a split's tasks, or nil when nothing can list them.
local function list(decl, split, raise)
  if decl.list then return own_list(decl, split, raise) end
  if decl.get and decl.count then
    return by_get(decl, split, 0, count(decl, split, raise), raise)
  end
  return nil
end

-- Tasks [start:stop] of a split, or nil when nothing can give them.
local function range(decl, split, start, stop, raise)
  if decl.range then
    local r = decl.range(split, start, stop)
    if not listlike(r) then
      raise("EVALUE", format("tasks.range(%s, ...) must return a list of "
        .. "tasks, got %s", quoted(split), json_type(r)), 0)
    end
    return r
  end
  if decl.get and decl.count then
    local i, j = bounds(count(decl, split, raise), start, stop)
    return by_get(decl, split, i, j, raise)
  end
  if decl.list then
    local l = own_list(decl, split, raise)
    local i, j = bounds(#l, start, stop)
    local out = json.array()
    for k = i + 1, j do out[#out + 1] = l[k] end
    return out
  end
  return nil
end

-- ---- requests --------------------------------------------------------------

-- The fields each method takes besides "method".
local FIELDS = {
  splits = {},
  list = { split = true },
  count = { split = true },
  get = { split = true, index = true },
  range = { split = true, start = true, stop = true },
}

-- What each method needs that a declaration may lack (ENOTSUP).
local NEEDS = {
  list = "list its tasks: give tasks.list, or tasks.get and tasks.count",
  count = "count its tasks: give tasks.count, or tasks.list",
  range = "give a range of its tasks: give tasks.range, tasks.list, or "
    .. "tasks.get and tasks.count",
}

-- The value of whole-number field `k` of request `req` (nil when absent
-- or null, unless `required`).
local function index_field(req, k, raise, required)
  local v = given(req[k])
  if v == nil then
    if required then raise("ESCHEMA", "request." .. k .. ": required", 0) end
    return nil
  end
  local n = whole(v)
  if n == nil then
    raise("ESCHEMA", format("request.%s: expected integer, got %s", k,
      json_type(v)), 0)
  end
  return n
end

-- Checks a request and returns its method and split.
local function check(decl, req, raise)
  if type(req) ~= "table" or getmetatable(req) ~= nil then
    raise("ESCHEMA", "request: expected an object {\"method\": ...}, got "
      .. json_type(req), 0)
  end
  local method = req.method
  local fields = type(method) == "string" and FIELDS[method]
  if not fields then
    raise("ESCHEMA", method == nil and "request.method: required"
      or "request.method: expected one of splits, list, count, get, "
      .. "range, got " .. (type(method) == "string" and quoted(method)
        or json_type(method)), 0)
  end
  for k in pairs(req) do
    if k ~= "method" and not fields[k] then
      raise("ESCHEMA", format("request.%s: unknown field for a %s request",
        tostring(k), method), 0)
    end
  end
  if method == "splits" then return method, nil end
  local split = req.split
  if type(split) ~= "string" then
    raise("ESCHEMA", split == nil and "request.split: required"
      or "request.split: expected string, got " .. json_type(split), 0)
  end
  known(decl, split, raise, "request.split")
  return method, split
end

-- A list the encoder writes as a JSON array even when empty.
local function array(t)
  if next(t) == nil then return json.array() end
  return t
end

function M.call(decl, req, raise, name)
  local method, split = check(decl, req, raise)
  local value, what
  if method == "splits" then
    value, what = splits(decl, raise), "the splits"
  elseif method == "count" then
    value = count(decl, split, raise)
  elseif method == "list" then
    value, what = list(decl, split, raise), "the tasks of split "
      .. quoted(split)
  elseif method == "get" then
    local i = index_field(req, "index", raise, true)
    if i >= 0 then value = get(decl, split, i, raise) end
    if value == nil then
      raise("ERANGE", format("no task at index %d of split %s", i,
        quoted(split)), 0)
    end
    what = format("the task at index %d of split %s", i, quoted(split))
  else
    local start = index_field(req, "start", raise)
    local stop = index_field(req, "stop", raise)
    value, what = range(decl, split, start, stop, raise),
      "the tasks of split " .. quoted(split)
  end
  if value == nil then
    raise("ENOTSUP", format("environment %s cannot %s", name,
      NEEDS[method]), 0)
  end
  if type(value) == "table" and method ~= "get" then value = array(value) end
  local text, err = json.encode(value)
  if not text then
    raise("EVALUE", what .. " cannot be sent as JSON: "
      .. err:gsub("^EVALUE: ", ""), 0)
  end
  return text
end

function M.select(decl, opts, raise)
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
  known(decl, split, raise, "reset.split")
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
  local task = i >= 0 and get(decl, split, i, raise) or nil
  if task == nil then
    raise("ESCHEMA", format("reset.index: no task at index %d of split %s",
      i, quoted(split)), 0)
  end
  opts.index, opts.task = i, task
end

return M
