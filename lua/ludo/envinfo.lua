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
  }
  return info, mod.action ~= nil
end

return M
