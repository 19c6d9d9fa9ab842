-- bench/eval_chain.c's batched mode: one policy state answers the actions
-- of all the chains in one call per round, the bare cost of batching the
-- slots' policy calls (docs/eval.md, Figures). Not how `ludo eval` runs
-- a policy: its slots keep a state each (see docs/eval.md for why).
local P = require("ludo.eval.policy")
local json = require("ludo.json")

local M = {}

M.init = P.init

-- items: {args, ...} (each the arguments `ludo eval` gives a Lua
-- policy's action: step, reward, error, result text, observation) -> the
-- actions, in order.
function M.actions(items)
  local out, action = json.array(), P.action
  for i = 1, #items do out[i] = action(table.unpack(items[i], 1, 5)) end
  return out
end

return M
