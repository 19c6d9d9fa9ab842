-- ludo.tools: an environment's MCP tools in its session state (internal:
-- loaded by the runtime, only into the states of environments that
-- declare tools, so the others do not carry this code). See
-- docs/environments.md, "Tools".
--   bind(tools, checks, list, raise) -> {takes, step, call}
--     (the runner takes list_tools/call_tool actions itself; takes() is
--     the same test, for other callers)
--     tools: the module's declaration; checks: tool name -> the C
--     validator of its arguments; list: the tool list as JSON;
--     raise: raises ludo error objects (raise(code, text, level)).
--   takes(action): whether a step action is a tool action
--     ({"type":"list_tools"} or {"type":"call_tool",...});
--   step(action): the observation of that step (OpenEnv's
--     ListToolsObservation or CallToolObservation);
--   call(req): {"name","arguments"} -> MCP's CallToolResult (call 5).
local null = require("ludo.null")
local json = require("ludo.json")
local schema = require("ludo.schema")

local M = {}

local type, pairs, pcall, error, tostring, getmetatable =
  type, pairs, pcall, error, tostring, getmetatable
local redact = require("ludo.core").redact

function M.bind(tools, checks, list, raiser)
  local tool_checks, tools_json, raise = checks, list, raiser
  local tool_nulls = {}
  local tool_runs, tool_inputs = {}, {}
  for k, t in pairs(tools) do
    local name = type(k) == "string" and k or t.name
    tool_runs[name], tool_inputs[name] = t.run, t.input
  end

  -- Whether v encodes as a JSON object (a decoded array has the array
  -- metatable; a plain sequence encodes as an array too).
  local function is_object(v)
    return type(v) == "table" and getmetatable(v) == nil and v[1] == nil
  end

  local ACTION_FIELDS = {
    list_tools = { type = true, metadata = true },
    call_tool = { type = true, metadata = true, tool_name = true,
      arguments = true },
  }

  -- Checks the shape of a list_tools / call_tool action (OpenEnv's
  -- ListToolsAction and CallToolAction, which forbid unknown fields), in
  -- pydantic's words, which ludo serve maps to pydantic's error types
  -- (extra_forbidden, missing, string_type, dict_type; docs/protocol.md).
  local function check_tool_action(a)
    local fields = ACTION_FIELDS[a.type]
    for k in pairs(a) do
      if not fields[k] then
        raise("ESCHEMA", "action." .. tostring(k) .. ": Extra inputs are "
          .. "not permitted", 0)
      end
    end
    if a.metadata ~= nil and not is_object(a.metadata) then
      raise("ESCHEMA", "action.metadata: Input should be a valid "
        .. "dictionary", 0)
    end
    if a.type == "call_tool" then
      if a.tool_name == nil then
        raise("ESCHEMA", "action.tool_name: Field required", 0)
      elseif type(a.tool_name) ~= "string" then
        raise("ESCHEMA", "action.tool_name: Input should be a valid "
          .. "string", 0)
      end
      if a.arguments ~= nil and not is_object(a.arguments) then
        raise("ESCHEMA", "action.arguments: Input should be a valid "
          .. "dictionary", 0)
      end
    end
  end

  -- MCP's CallToolResult of a tool's return value, in OpenEnv's field names
  -- (and MCP's own, when `mcp` is set): text content, and the structured
  -- content (the value itself when it is an object, else {result = value}).
  -- The text of anything but a string is its JSON, as in `data`: NaN is
  -- null in both (docs/json.md), never Lua's "-nan", and a float keeps
  -- the digits %.14g would drop.
  local function tool_result(value, mcp)
    local content = json.array()
    if value == nil then value = null end
    if value ~= null then
      local text = value
      if type(value) ~= "string" then
        local err
        text, err = json.encode(value)
        if not text then raise("EVALUE", "the tool's result: " .. err, 0) end
      end
      -- MCP clients refuse null annotations; OpenEnv's clients show them.
      content[1] = mcp and { type = "text", text = text }
        or { type = "text", text = text, annotations = null, meta = null }
    end
    local sc = is_object(value) and value or { result = value }
    local r = { content = content, structured_content = sc, meta = null,
      data = value, is_error = false }
    if mcp then
      r.structuredContent, r.isError = sc, false
    end
    return r
  end

  -- The text of a tool's error value `e`, as it may leave the session:
  -- a string or number as it is, one of ludo's error objects by its
  -- message ("ECODE: ..."), anything else by its type, as the core names
  -- it ("table: 0x55..." would show a heap address); addresses in the
  -- text hidden as the core hides them in the messages it hands out
  -- (ludo.core.redact, docs/sandbox.md).
  local function error_text(e)
    local t = type(e)
    if t == "number" or (t == "userdata" and getmetatable(e) == "ludo.error")
    then
      e = tostring(e)
    elseif t ~= "string" then
      return "(error object is a " .. t .. " value)"
    end
    return redact(e)
  end

  -- Runs tool `name`: true, result; or false, error_type, message for an
  -- unknown tool or arguments that do not match its schema.
  local function run_tool(name, args, mcp)
    local check = tool_checks[name]
    if not check then
      return false, "tool_not_found", "Tool '" .. name .. "' not found"
    end
    if args == nil then args = {} end
    local ok, err = check(args)
    if not ok then return false, "invalid_args", err end
    local nulls = tool_nulls[name]
    if nulls == nil then -- an optional argument given as null: nil
      nulls = schema.nulls(tool_inputs[name]) or false
      tool_nulls[name] = nulls
    end
    if nulls then schema.drop_nulls(args, nulls) end
    return true, tool_result(tool_runs[name](args), mcp)
  end

  -- A step whose action is list_tools or call_tool: its observation.
  local function tool_step(action)
    check_tool_action(action)
    if action.type == "list_tools" then
      return { tools = json.decode(tools_json) }
    end
    local name = action.tool_name
    local ok, res, why, msg = pcall(run_tool, name, action.arguments)
    if ok and res then
      return { tool_name = name, result = why, error = null }
    end
    if not ok then -- the tool raised
      -- A memory error goes on as it is: the core knows it by its text
      -- and by the cap having refused memory in this call. A call stopped
      -- by its budget or the host needs nothing here: the hook raises the
      -- stop again at the next instruction, whatever caught it. Any other
      -- error, whatever its text says ("ETIMEOUT: ..." included), is the
      -- tool's.
      if res == "not enough memory" then error(res, 0) end
      why, msg = "execution_error", error_text(res)
    end
    return { tool_name = name, result = null,
      error = { error_type = why, message = msg } }
  end

  -- Call 5: {"name": ..., "arguments": {...}} -> CallToolResult.
  local function call_tool(req)
    if not is_object(req) or type(req.name) ~= "string" then
      raise("ESCHEMA", "the tool call needs a \"name\" string", 0)
    end
    if req.arguments ~= nil and not is_object(req.arguments) then
      raise("ESCHEMA", "arguments: expected object", 0)
    end
    local ok, res, msg = run_tool(req.name, req.arguments, true)
    if ok then return res end
    raise(res == "tool_not_found" and "ENOENT" or "ESCHEMA", msg, 0)
  end

  return {
    takes = function(action) return ACTION_FIELDS[action.type] ~= nil end,
    step = tool_step,
    call = call_tool,
  }
end

return M
