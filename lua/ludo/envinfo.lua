-- ludo.envinfo: reads an environment module's declaration. Runs once per
-- environment, in the probe state that loads it first, so the checks and
-- the schema expansion cost nothing in the other session states.
local schema = require("ludo.schema")
local null = require("ludo.null")

local M = {}

-- Raises ELOAD as one of ludo's error objects (the raiser describe gets
-- from the C core): a malformed declaration is the module's fault, and
-- its message needs no traceback through this file.
local raise

local function fail(fmt, ...)
  raise("ELOAD", string.format(fmt, ...), 0)
end

local function callable(v)
  if type(v) == "function" then return true end
  local mt = getmetatable(v)
  return type(mt) == "table" and mt.__call ~= nil
end

local function expand(decl, what)
  local ok, s = pcall(schema.expand, decl, what)
  if not ok then fail("%s", s) end
  return schema.clean(s)
end

-- The fields every OpenEnv action and observation has (its Action and
-- Observation base classes), added to a declared object schema that does
-- not name them: typed OpenEnv clients send `"metadata": {}` with every
-- action, and every observation on the wire carries `metadata` (and may
-- carry `reward` and `done`), so /schema describes what is sent and an
-- action's metadata passes the check (the environment sees it as
-- action.metadata, as OpenEnv's do).
local METADATA = { type = "object", additionalProperties = true,
  description = "Additional metadata" }
local ENVELOPE = {
  action = { metadata = METADATA },
  observation = {
    done = { type = "boolean", description = "Whether the episode has ended" },
    -- (OpenEnv's type also allows a boolean; ludo's rewards are numbers)
    reward = { type = { "number", "null" },
      description = "The reward of the last call" },
    metadata = METADATA,
  },
}

local function with_envelope(s, what)
  if s.type ~= "object" or type(s.properties) ~= "table" then return s end
  for k, v in pairs(ENVELOPE[what]) do
    if s.properties[k] == nil then s.properties[k] = v end
  end
  return s
end

-- Names a tool may not take: they are the session's own calls (OpenEnv's
-- RESERVED_TOOL_NAMES).
local RESERVED = { reset = true, step = true, state = true, close = true }

-- Checks one tool declaration and returns its description.
local function tool_info(name, t)
  if type(name) ~= "string" or not name:match("^[%w_%-%.]+$")
    or #name > 128 then
    fail("tools: a tool name must be 1-128 letters, digits, '_', '-' or "
      .. "'.', got %s", type(name) == "string" and string.format("%q", name)
      or type(name))
  end
  if RESERVED[name] then
    fail("tools: the name '%s' is reserved (reset, step, state and close "
      .. "are the session's own calls)", name)
  end
  if type(t) ~= "table" then
    fail("tools.%s must be a table, got %s", name, type(t))
  end
  if not callable(t.run) then
    fail("tools.%s.run must be a function, got %s", name, type(t.run))
  end
  if t.description ~= nil and type(t.description) ~= "string" then
    fail("tools.%s.description must be a string, got %s", name,
      type(t.description))
  end
  local input = expand(t.input or {}, "tools." .. name .. ".input")
  if input.type ~= "object" then
    fail("tools.%s.input must describe an object (the tool's arguments)",
      name)
  end
  return { name = name, description = t.description or "",
    input_schema = input }
end

-- The tools' descriptions in their order: a list keeps its own, a map of
-- name = tool is sorted by name. nil when there are none.
local function tools_info(tools)
  if tools == nil then return nil end
  if type(tools) ~= "table" then
    fail("tools must be a table, got %s", type(tools))
  end
  local out, seen = {}, {}
  if #tools > 0 then
    for i, t in ipairs(tools) do
      if type(t) ~= "table" then
        fail("tools[%d] must be a table, got %s", i, type(t))
      end
      local info = tool_info(t.name, t)
      if seen[info.name] then fail("tools: '%s' is declared twice", t.name) end
      seen[info.name] = true
      out[i] = info
    end
    return out
  end
  local names = {}
  for k in pairs(tools) do names[#names + 1] = k end
  for _, k in ipairs(names) do
    if type(k) ~= "string" then fail("tools: names must be strings") end
  end
  table.sort(names)
  for i, k in ipairs(names) do out[i] = tool_info(k, tools[k]) end
  return out
end

-- The fields of a `tasks` declaration; see ludo.tasks.
local TASK_FUNCS = { "list", "count", "get", "range" }

-- Checks a static list of splits: names, or tables with a name (and a
-- type, if any, that is a string), each listed once.
local function check_splits(list)
  local n, seen = #list, {}
  for _ in pairs(list) do n = n - 1 end
  if n ~= 0 then fail("tasks.splits must be a list of split names") end
  for i, s in ipairs(list) do
    local name = s
    if type(s) == "table" then
      name = s.name
      if type(name) ~= "string" then
        fail("tasks.splits[%d].name must be a string, got %s", i,
          type(name))
      end
      if s.type ~= nil and type(s.type) ~= "string" then
        fail("tasks.splits[%d].type must be a string, got %s", i,
          type(s.type))
      end
    elseif type(s) ~= "string" then
      fail("tasks.splits[%d] must be a split name or a table with a name, "
        .. "got %s", i, type(s))
    end
    if seen[name] then fail("tasks.splits: '%s' is listed twice", name) end
    seen[name] = true
  end
end

-- Checks the `tasks` declaration (the Task API, docs/environments.md).
local function check_tasks(tasks)
  if tasks == nil then return end
  if type(tasks) ~= "table" then
    fail("tasks must be a table, got %s", type(tasks))
  end
  for k in pairs(tasks) do
    if k ~= "splits" and k ~= "list" and k ~= "count" and k ~= "get"
      and k ~= "range" then
      fail("tasks.%s: unknown field (the fields are splits, list, count, "
        .. "get and range)", tostring(k))
    end
  end
  local splits = tasks.splits
  if type(splits) == "table" and not callable(splits) then
    check_splits(splits)
  elseif not callable(splits) then
    fail("tasks.splits must be a list of split names or a function, got %s",
      type(splits))
  end
  for _, k in ipairs(TASK_FUNCS) do
    if tasks[k] ~= nil and not callable(tasks[k]) then
      fail("tasks.%s must be a function, got %s", k, type(tasks[k]))
    end
  end
  if tasks.get == nil and tasks.list == nil then
    fail("tasks needs get(split, index) or list(split): a reset selects "
      .. "its task by index")
  end
end

-- Checks the module and returns its description (the table behind
-- GET /metadata and /schema) and whether it declares an action schema.
-- `raiser` raises ludo's error objects (see ludo.runner's init).
function M.describe(mod, default_name, raiser)
  raise = raiser
  if type(mod) ~= "table" then
    fail("the environment module must return a table, got %s", type(mod))
  end
  if type(mod.step) ~= "function" then
    fail("the environment module has no step(action) function")
  end
  for _, k in ipairs({ "reset", "state", "close" }) do
    if mod[k] ~= nil and type(mod[k]) ~= "function" then
      fail("%s must be a function, got %s", k, type(mod[k]))
    end
  end
  if mod.rubric ~= nil and not callable(mod.rubric) then
    fail("rubric must be a rubric object or a function, got %s",
      type(mod.rubric))
  end
  if mod.transform ~= nil and not callable(mod.transform) then
    fail("transform must be a function or a transform object, got %s",
      type(mod.transform))
  end
  check_tasks(mod.tasks)
  for _, k in ipairs({ "name", "description", "version", "author",
    "documentation_url", "readme" }) do
    if mod[k] ~= nil and type(mod[k]) ~= "string" then
      fail("%s must be a string, got %s", k, type(mod[k]))
    end
  end
  local name = mod.name or default_name or "Environment"
  local concurrent = mod.concurrent
  if concurrent == nil then concurrent = true end
  local info = {
    name = name,
    description = mod.description or (name .. " environment"),
    version = mod.version or "1.0.0",
    author = mod.author or null,
    documentation_url = mod.documentation_url or null,
    readme_content = mod.readme or null,
    concurrent = concurrent and true or false,
    action = with_envelope(expand(mod.action, "action"), "action"),
    observation = with_envelope(expand(mod.observation, "observation"),
      "observation"),
    state = expand(mod.state_schema, "state_schema"),
    tools = tools_info(mod.tools),
  }
  return info, mod.action ~= nil
end

return M
