-- ludo.tasks_api: the tasks calls (ludo_session_tasks, the server's Task
-- API; docs/environments.md "Tasks"), on the lookups of ludo.tasks. The C
-- core loads it into a session's state at the session's first tasks call
-- and binds it with M.bind(tasks), where `tasks` is ludo.tasks bound to
-- the module's tasks; ludo.runner then calls
--   call(request): {"method": "splits" | "list" | "count" | "get" |
--     "range", ...} -> the JSON text of the answer.
-- What the declaration does not give is derived from what it gives: count
-- from list, get from list, list and range from get and count, or from
-- list; range's start and stop follow Python's slices. Failures are raised
-- through the C core's raiser: ESCHEMA (a malformed request, an unknown
-- split), ENOTSUP (nothing to answer with), ERANGE (no task at an index),
-- EVALUE (a function returned what a task list cannot hold).
local json = require("ludo.json")

local M = {}

local type, tostring, format = type, tostring, string.format

-- Split names that keep their own type; any other is a validation split.
local TYPES = { train = true, validation = true, test = true }

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

function M.bind(tasks)
  local T, decl, raise = tasks.lib, tasks.decl, tasks.raise
  local json_type, quoted = T.json_type, T.quoted

  -- The splits, as {name, type} tables: a name is its own type when it is
  -- train, validation or test, else "validation" (OpenEnv's rule); a
  -- table keeps its fields, its type defaulting by the same rule.
  local function splits()
    local out = json.array()
    for i, s in ipairs(T.split_list(decl, raise)) do
      local e
      if type(s) == "string" then
        e = { name = s, type = TYPES[s] and s or "validation" }
      else
        e = {}
        for k, v in pairs(s) do e[k] = v end
        if e.type == nil then
          e.type = TYPES[s.name] and s.name or "validation"
        end
      end
      out[i] = e
    end
    return out
  end

  -- Tasks i .. j-1 fetched one by one with get; count said they exist.
  local function by_get(split, i, j)
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

  -- All of a split's tasks, or nil when nothing can list them.
  local function list(split)
    if decl.list then return T.own_list(decl, split, raise) end
    if decl.get and decl.count then
      return by_get(split, 0, T.count(decl, split, raise))
    end
    return nil
  end

  -- Tasks [start:stop] of a split, or nil when nothing can give them.
  local function range(split, start, stop)
    if decl.range then
      local r = decl.range(split, start, stop)
      if not T.listlike(r) then
        raise("EVALUE", format("tasks.range(%s, ...) must return a list of "
          .. "tasks, got %s", quoted(split), json_type(r)), 0)
      end
      return r
    end
    if decl.get and decl.count then
      return by_get(split, bounds(T.count(decl, split, raise), start, stop))
    end
    if decl.list then
      local l = T.own_list(decl, split, raise)
      local i, j = bounds(#l, start, stop)
      local out = json.array()
      for k = i + 1, j do out[#out + 1] = l[k] end
      return out
    end
    return nil
  end

  -- The whole-number field `k` of `req` (nil when absent or null, unless
  -- `required`).
  local function index_field(req, k, required)
    local v = T.given(req[k])
    if v == nil then
      if required then raise("ESCHEMA", "request." .. k .. ": required", 0) end
      return nil
    end
    local n = T.whole(v)
    if n == nil then
      raise("ESCHEMA", format("request.%s: expected integer, got %s", k,
        json_type(v)), 0)
    end
    return n
  end

  -- Checks a request and returns its method and split.
  local function check(req)
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
        raise("ESCHEMA", format("request.%s: unknown field for a %s "
          .. "request", tostring(k), method), 0)
      end
    end
    if method == "splits" then return method, nil end
    local split = req.split
    if type(split) ~= "string" then
      raise("ESCHEMA", split == nil and "request.split: required"
        or "request.split: expected string, got " .. json_type(split), 0)
    end
    T.known(decl, split, raise, "request.split")
    return method, split
  end

  local function call(req)
    local method, split = check(req)
    local value, what
    if method == "splits" then
      value, what = splits(), "the splits"
    elseif method == "count" then
      value = T.count(decl, split, raise)
    elseif method == "list" then
      value, what = list(split), "the tasks of split " .. quoted(split)
    elseif method == "get" then
      local i = index_field(req, "index", true)
      if i >= 0 then value = T.get(decl, split, i, raise) end
      if value == nil then
        raise("ERANGE", format("no task at index %d of split %s", i,
          quoted(split)), 0)
      end
      what = format("the task at index %d of split %s", i, quoted(split))
    else
      local start = index_field(req, "start")
      local stop = index_field(req, "stop")
      value, what = range(split, start, stop),
        "the tasks of split " .. quoted(split)
    end
    if value == nil then
      raise("ENOTSUP", format("environment %s cannot %s", tasks.name,
        NEEDS[method]), 0)
    end
    if method ~= "get" and type(value) == "table" and next(value) == nil then
      value = json.array() -- an empty list is [], not {}
    end
    local text, err = json.encode(value)
    if not text then
      raise("EVALUE", what .. " cannot be sent as JSON: "
        .. err:gsub("^EVALUE: ", ""), 0)
    end
    return text
  end

  return { call = call }
end

return M
