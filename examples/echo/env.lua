-- The echo environment (OpenEnv's echo_env semantics, written for ludo):
-- the action carries a message, the observation echoes it with its length,
-- the reward comes from the message, and state() counts the steps.
local R = require("ludo.rubrics")

-- A message's length in characters, as Python's len() counts it in
-- OpenEnv's echo_env ("é€" is 2, not its 5 bytes).
local function length(s) return utf8.len(s) or #s end

local Length = R.Rubric:extend("Length")
-- OpenEnv's echo reward is 0.1 per character; capped at 1 here.
function Length:forward(action)
  return math.min(1.0, length(action.message) * 0.1)
end

local NonEmpty = R.Rubric:extend("NonEmpty")
function NonEmpty:forward(action)
  return #action.message > 0 and 1.0 or 0.0
end

local Printable = R.Rubric:extend("Printable")
function Printable:forward(action)
  return action.message:find("[^\32-\126]") and 0.0 or 1.0
end

local env = {
  name = "echo_env",
  description = "Echoes the message back; reward grows with its length.",
  version = "1.0.0",
  concurrent = true,
  action = { message = "string" },
  observation = { echoed_message = "string", message_length = "integer" },
  rubric = R.WeightedSum({ Length(), NonEmpty(), Printable() },
    { 0.6, 0.2, 0.2 }),
}

-- MCP tools, as OpenEnv's echo_env has them: reachable through step
-- actions ({"type":"call_tool","tool_name":"echo_message","arguments":
-- {"message":"hi"}}) and through MCP's tools/call.
env.tools = {
  echo_message = {
    description = "Echo back the provided message.",
    input = { message = "string" },
    run = function(args) return args.message end,
  },
  echo_with_length = {
    description = "Echo back the message with its length.",
    input = { message = "string" },
    run = function(args)
      return { message = args.message, length = length(args.message) }
    end,
  },
}

-- state() is the runtime's: the episode id and the step count (which
-- counts tool calls made through step too, as OpenEnv's echo_env does).

function env.reset()
  return { echoed_message = "Echo environment ready!", message_length = 0,
    reward = 0.0 }
end

function env.step(action)
  return { echoed_message = action.message,
    message_length = length(action.message) }
end

return env
