-- A policy for the echo environment, for `ludo run --policy`: says longer
-- and longer greetings (the echo reward grows with the message length).
local n = 0
return {
  reset = function() n = 0 end,
  act = function()
    n = n + 1
    return { message = string.rep("hi", n) }
  end,
}
