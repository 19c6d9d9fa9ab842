-- ludo.eval.policy: the policy of one `ludo eval` slot (docs/eval.md), in
-- a sandboxed script of its own. It wraps either a Lua policy (through
-- ludo.policy, as `ludo run` takes it; no module: random actions drawn
-- from the action schema) or the run file's LLM policy: prompt(observation,
-- history) -> messages, a chat with a ludo.llm client, parse(text) ->
-- action. For a Lua policy the runner calls action(), which answers the
-- action itself (its JSON text is passed to the step as it is: no
-- wrapping, one Lua call less per step). For an LLM policy it calls act(),
-- which answers {action = ..., text = model text}, or, when parse raised,
-- {invalid = true, text = ..., error = ...} (also when parse returned nil;
-- a raised value that is not a string is given as its JSON text): an
-- invalid action is recorded by the runner, not fatal. A failed LLM call
-- raises ("ELLM: ...") and fails the episode.
local json = require("ludo.json")
local null = require("ludo.null")

local M = {}

local impl        -- {reset = fn(seed, result), act = fn(result, ctx)}
local runfile     -- the run file's table (LLM policy)

-- The first number of `v` that JSON cannot hold (NaN, an infinity), as
-- its path from `path` and its value; nil when there is none. Keys are
-- visited in sorted order, so every run names the same one; `depth`
-- stops the walk where the encoder would refuse the nesting anyway.
local function nonfinite(v, path, depth)
  if type(v) == "number" then
    if v ~= v or v == math.huge or v == -math.huge then return path, v end
    return nil
  end
  if type(v) ~= "table" or depth > 128 then return nil end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b)
    local ta = type(a)
    if ta == type(b) and (ta == "number" or ta == "string") then
      return a < b
    end
    return type(a) < type(b)
  end)
  for _, k in ipairs(keys) do
    local at = type(k) == "number" and ("%s[%d]"):format(path, k)
      or path .. "." .. tostring(k)
    local p, x = nonfinite(v[k], at, depth + 1)
    if p then return p, x end
  end
  return nil
end

-- Whether `v` holds a number JSON cannot hold, fast (no path).
local function has_nonfinite(v, depth)
  if type(v) == "number" then
    return v ~= v or v == math.huge or v == -math.huge
  end
  if type(v) ~= "table" or depth > 128 then return false end
  for _, x in pairs(v) do
    if has_nonfinite(x, depth + 1) then return true end
  end
  return false
end

-- Why an action holding NaN or an infinity is refused (nil when it holds
-- none): the JSON encoder writes them as null, which the environment
-- would take for "no value", so the policy's mistake would pass unseen.
local function refusal(action)
  if not has_nonfinite(action, 0) then return nil end
  local path, x = nonfinite(action, "action", 0)
  return ("%s is %s: an action's numbers must be finite (JSON has no " ..
    "NaN or infinity)"):format(path, x ~= x and "nan" or tostring(x))
end
M.refusal = refusal

-- What ludo.eval.policy raises for an action it refuses (a Lua policy's:
-- runtime/cli/eval_episode.c takes an error so worded for an invalid
-- action, not the policy's failure).
local INVALID = "ludo.eval.policy: invalid action: "

local function lua_policy(module, info)
  local P = require("ludo.policy")
  P.init(module, info)
  -- The runner calls action() for each step: ludo.policy's own act_text
  -- (the result as text, decoded only if the policy reads it), so a step
  -- costs one Lua call into the policy and no wrapping table; the action
  -- is checked for numbers JSON cannot hold before the encoder sees it.
  local act_text = P.act_text
  M.action = function(...)
    local action = act_text(...)
    if type(action) == "table" or type(action) == "number" then
      local why = refusal(action)
      if why then error(INVALID .. why, 0) end
    end
    return action
  end
  return {
    reset = P.reset,
    act = function(result, ctx) return json.array({ P.act(result, ctx) }) end,
  }
end

-- A raised value as text that is the same in every run: a string as it
-- is, anything else as its JSON text (a table's address would differ).
local function error_text(e)
  if type(e) == "string" then
    -- Bytes that are not UTF-8 become U+FFFD: the text goes into JSON.
    local out, i = {}, 1
    while true do
      local n, bad = utf8.len(e, i)
      if n then
        out[#out + 1] = e:sub(i)
        return table.concat(out)
      end
      out[#out + 1] = e:sub(i, bad - 1) .. "\u{FFFD}"
      i = bad + 1
    end
  end
  local ok, text = pcall(require("ludo.jsontext").encode, e)
  return ok and text or "(a " .. type(e) .. ")"
end

-- The text of an error raised by a library: without the "file:line: "
-- of our own code that called it (where it was raised says nothing to
-- the run file's author).
local function bare(e)
  e = tostring(e)
  return e:match("^[^\n:]+:%d+: (.*)$") or e
end

-- The run file's llm options as a client; raises a one-line error naming
-- policy.llm when they are wrong (an unknown option, a key variable that
-- is not set).
local function llm_client(options)
  local ok, client = pcall(require("ludo.llm").client, options)
  if not ok then error("policy.llm: " .. bare(client), 0) end
  return client
end

-- The messages prompt() returned, checked: anything but a table would
-- fail inside the client, with an error naming this module.
local function checked_messages(messages)
  if type(messages) ~= "table" then
    error(("policy.prompt must return a list of messages ({{role = " ..
      "\"user\", content = \"...\"}}), but it returned %s"):format(
      messages == nil and "nil" or "a " .. type(messages)), 0)
  end
  return messages
end

local function llm_policy(info)
  local p = runfile.policy
  local client = llm_client(p.llm)
  local history
  local function note(ctx)
    local last = history[#history]
    if last == nil then return end
    if ctx.error ~= nil and ctx.error ~= null then last.error = ctx.error end
    if ctx.reward ~= nil and ctx.reward ~= null then
      last.reward = ctx.reward
    end
  end
  return {
    reset = function(seed)
      history = {}
      if seed ~= nil and seed ~= null then math.randomseed(seed) end
    end,
    act = function(result, ctx)
      note(ctx)
      local messages = checked_messages(p.prompt(result.observation,
        history, info))
      local text, why = client:chat(messages)
      if text == nil then error(why, 0) end
      local entry = { observation = result.observation, text = text }
      history[#history + 1] = entry
      local ok, action = pcall(p.parse, text)
      if not ok or action == nil or action == null then
        entry.error = ok and "parse returned nil" or error_text(action)
        return { invalid = true, text = text, error = entry.error }
      end
      local refused = refusal(action)
      if refused then
        entry.error = refused
        return { invalid = true, text = text, error = refused }
      end
      entry.action = action
      return { action = action, text = text }
    end,
  }
end

-- Sets the slot's policy up. spec = {kind = "lua"|"random"|"llm",
-- module = "name" (lua), runfile = "name" (the run file's module, when
-- there is one)}; info is the environment's description.
function M.init(spec, info)
  if spec.runfile ~= nil and spec.runfile ~= null then
    runfile = require(spec.runfile)
  end
  if spec.kind == "llm" then
    impl = llm_policy(info)
  else
    local module = spec.kind == "lua" and spec.module or null
    impl = lua_policy(module, info)
  end
end

-- Starts an episode: its seed and the reset's result.
function M.reset(seed, result)
  impl.reset(seed, result)
end

-- The next action for the last result, as the list {action} for a Lua
-- policy (the runner calls M.action instead, which answers the action
-- itself: set by init for a Lua policy) or the reply object of an LLM
-- policy. ctx = {step, reward, done, seed, error: why the environment
-- refused the last action, if it did}.
function M.act(result, ctx)
  return impl.act(result, ctx)
end

return M
