-- ludo.null: the one sentinel standing for JSON null in Lua values.
--
-- A Lua table cannot hold nil, so JSON null inside objects and arrays is
-- represented by this unique table. The C core (cJSON bridge) requires this
-- same module, so `v == require("ludo.null")` is the test everywhere.
-- The sentinel is frozen: it has no fields, refuses new ones, and its
-- metatable is protected. tostring(null) is "ludo.null".
local null = setmetatable({}, {
  __name = "ludo.null",
  __tostring = function() return "ludo.null" end,
  __newindex = function()
    error("ludo.null is read-only", 2)
  end,
  __metatable = "ludo.null",
})

return null
