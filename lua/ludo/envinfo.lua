-- ludo.envinfo: reads an environment module's declaration. Runs once per
-- environment, in the probe state that loads it first, so the checks and
-- the schema expansion cost nothing in the other session states.
local schema = require("ludo.schema")
local null = require("ludo.null")

local M = {}

local function fail(fmt, ...)
  error("ELOAD: " .. string.format(fmt, ...), 0)
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

-- Checks the module and returns its description (the table behind
-- GET /metadata and /schema) and whether it declares an action schema.
function M.describe(mod, default_name)
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
    action = expand(mod.action, "action"),
    observation = expand(mod.observation, "observation"),
    state = expand(mod.state_schema, "state_schema"),
    tools = tools_info(mod.tools),
  }
  return info, mod.action ~= nil
end

return M
