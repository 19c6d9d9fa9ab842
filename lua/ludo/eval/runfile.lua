-- ludo.eval.runfile: reads the run file of `ludo eval` (docs/eval.md) in a
-- sandboxed script of its own. A run file is a Lua module returning a
-- table; it may hold functions (an LLM policy's prompt and parse, a
-- success rule), so the C side cannot read it as JSON: load() checks every
-- field and returns the JSON-able part, with the functions described.
local null = require("ludo.null")

local M = {}

local FIELDS = {
  env = true, tasks = true, episodes = true, repeats = true, pass_k = true,
  policy = true, concurrency = true, workers = true, max_steps = true,
  seed = true, out = true, success = true, name = true, description = true,
}

local LLM_SECRETS = { api_key = true, key = true, token = true,
  authorization = true }

-- The fields of an LLM policy's table: anything else is a mistake (a
-- typo, or a client option such as temperature put outside `llm`), which
-- would otherwise be dropped without a word.
local POLICY_FIELDS = { llm = true, prompt = true, parse = true }

local function fail(fmt, ...)
  error("run file: " .. fmt:format(...), 0)
end

-- The keys of `t` that `known` lacks, sorted: an error names the same
-- one in every run (pairs() has no order).
local function unknown_keys(t, known)
  local out = {}
  for k in pairs(t) do
    if not known[k] then out[#out + 1] = tostring(k) end
  end
  table.sort(out)
  return out
end

-- The names of `known`, sorted and comma-separated, for a message.
local function names(known)
  local out = {}
  for k in pairs(known) do out[#out + 1] = k end
  table.sort(out)
  return table.concat(out, ", ")
end

-- The largest whole number a field takes: exact in JSON (a seed is kept
-- below 2^53).
local MAX_WHOLE = 2 ^ 53 - 1

local function got(v)
  if type(v) == "string" then return ("the string %q"):format(v) end
  if math.type(v) == "float" then return ("%.17g"):format(v) end
  if type(v) == "number" then return tostring(v) end
  return "a " .. type(v)
end

local function whole(t, k, min)
  local v = t[k]
  if v == nil then return nil end
  v = math.type(v) == "float" and math.tointeger(v) or v -- 2^53, 1e6
  if math.type(v) ~= "integer" then
    fail("%s must be a whole number (got %s)", k, got(v))
  end
  if v < min or v > MAX_WHOLE then
    fail("%s must be a whole number from %d to 2^53 - 1 (got %s)", k, min,
      got(v))
  end
  return v
end

-- Worker processes: at most 256, as --workers takes (a run-file error,
-- not a usage error).
local MAX_WORKERS = 256

local function workers_of(t)
  local n = whole(t, "workers", 1)
  if n ~= nil and n > MAX_WORKERS then
    fail("workers must be 1 to %d (got %d)", MAX_WORKERS, n)
  end
  return n
end

local function ids_of(list, what)
  if type(list) ~= "table" or #list == 0 then
    fail("%s must be a non-empty list of task ids", what)
  end
  local out, seen = {}, {}
  for i, id in ipairs(list) do
    if type(id) ~= "string" then fail("%s[%d] must be a string", what, i) end
    if id:find("\0", 1, true) then
      fail("%s[%d] holds a NUL byte: not a task id", what, i)
    end
    -- A task listed twice would be two tasks of one id to pass@k (its
    -- attempts counted as one task's): give repeats for more attempts.
    if seen[id] then
      fail("%s[%d] is the task id %q again (%s[%d]): list each task " ..
        "once, and give repeats for more attempts", what, i, id, what,
        seen[id])
    end
    seen[id] = i
    out[i] = id
  end
  return out
end

local function tasks_of(t)
  if t == nil then return null end
  if type(t) == "table" and t.split == nil and type(t[1]) == "string" then
    return { ids = ids_of(t, "tasks") } -- ids looked up in every split
  end
  if type(t) ~= "table" or type(t.split) ~= "string" then
    fail("tasks must be a list of task ids or a table {split = \"name\"" ..
      "[, count = N][, ids = {...}]}")
  end
  local extra = unknown_keys(t, { split = true, count = true, ids = true })
  if #extra > 0 then
    fail("tasks.%s is not a field (split, count, ids)", extra[1])
  end
  local out = { split = t.split, count = whole(t, "count", 1) }
  if t.ids ~= nil then out.ids = ids_of(t.ids, "tasks.ids") end
  return out
end

local function llm_of(p)
  local extra = unknown_keys(p, POLICY_FIELDS)
  if #extra > 0 then
    fail("policy.%s is not a field of an LLM policy (%s; client options " ..
      "such as temperature go in policy.llm)", extra[1], names(POLICY_FIELDS))
  end
  if type(p.llm) ~= "table" then fail("policy.llm must be a table of " ..
    "client options (ludo.llm)") end
  if type(p.prompt) ~= "function" then
    fail("policy.prompt must be a function(observation, history) -> messages")
  end
  if type(p.parse) ~= "function" then
    fail("policy.parse must be a function(text) -> action")
  end
  local desc = { kind = "llm" }
  for k, v in pairs(p.llm) do
    if LLM_SECRETS[k] then
      fail("policy.llm.%s: never put a key in a run file; name the " ..
        "environment variable holding it with api_key_env", k)
    end
    if type(v) ~= "function" then desc[k] = v end
  end
  return desc
end

local function policy_of(p)
  if p == nil then return { kind = "random" } end
  if type(p) == "string" then return { kind = "lua", file = p } end
  if type(p) == "table" then return llm_of(p) end
  fail("policy must be a Lua policy's file name or an LLM policy table")
end

local function success_of(s)
  if s == nil then return { kind = "default" } end
  if type(s) == "number" then
    if s ~= s or s == math.huge or s == -math.huge then
      fail("success must be a finite reward threshold (got %s)", tostring(s))
    end
    return { kind = "threshold", threshold = s }
  end
  if type(s) == "function" then return { kind = "function" } end
  fail("success must be a function(result) -> boolean or a reward threshold")
end

local function pass_k_of(list)
  if list == nil then return nil end
  if type(list) ~= "table" then
    fail("pass_k must be a list of whole numbers")
  end
  local out = {}
  for i, k in ipairs(list) do
    if math.type(k) ~= "integer" or k < 1 then
      fail("pass_k[%d] must be a whole number >= 1", i)
    end
    out[i] = k
  end
  return out
end

-- Requires the run file (module `name`, from its folder) and returns its
-- fields as JSON-able values.
function M.load(name)
  local t = require(name)
  if type(t) ~= "table" then
    fail("%s returns a %s, not a table", name, type(t))
  end
  -- An environment's module named in place of a run file would fail on
  -- its first field that a run file lacks, which says nothing useful.
  if type(t.step) == "function" and type(t.reset) == "function" then
    fail("this file is an environment's module (it returns reset and " ..
      "step), not a run file: pass its folder (ludo eval DIR --policy " ..
      "...), or a run file whose env names it")
  end
  local extra = unknown_keys(t, FIELDS)
  if #extra > 0 then
    fail("%s is not a field of a run file", extra[1])
  end
  if t.env ~= nil and type(t.env) ~= "string" then
    fail("env must be an environment's path or a ws:// URL")
  end
  if t.out ~= nil and (type(t.out) ~= "string" or t.out == "") then
    fail("out must be a folder's name")
  end
  if t.tasks ~= nil and t.episodes ~= nil then
    fail("give tasks or episodes, not both")
  end
  -- (as --repeats is refused without tasks: a seeded episode is one
  -- attempt of its own, and a repeats the run would drop is a mistake)
  if t.repeats ~= nil and t.tasks == nil then
    fail("repeats needs tasks (attempts of each task); with episodes, "
      .. "each episode is one attempt")
  end
  return {
    env = t.env, tasks = tasks_of(t.tasks),
    episodes = whole(t, "episodes", 1),
    repeats = whole(t, "repeats", 1), pass_k = pass_k_of(t.pass_k),
    policy = policy_of(t.policy), concurrency = whole(t, "concurrency", 1),
    workers = workers_of(t),
    max_steps = whole(t, "max_steps", 1), seed = whole(t, "seed", 0),
    out = t.out, success = success_of(t.success),
  }
end

-- The run file's success(result) for an episode's record (the run file
-- `name` has a success function): a boolean.
function M.success(name, record)
  local ok = require(name).success(record)
  if type(ok) ~= "boolean" then
    error(string.format("success(result) must return true or false, got %s",
      type(ok)), 0)
  end
  return ok
end

return M
