-- A policy for the arith environment, for `ludo run --policy`: reads the
-- question ("a op b") and answers it.
local OPS = {
  ["+"] = function(a, b) return a + b end,
  ["-"] = function(a, b) return a - b end,
  ["*"] = function(a, b) return a * b end,
  ["/"] = function(a, b) return a // b end,
  ["^"] = function(a, b) return math.tointeger(a ^ b) end,
}

return function(obs)
  local a, op, b = obs.question:match("^(%d+) (%p) (%d+)$")
  return { answer = OPS[op](tonumber(a), tonumber(b)) }
end
