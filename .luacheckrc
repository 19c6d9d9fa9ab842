-- luacheck configuration (Debian's lua-check); `make lint` and make test
-- run it over the Lua of the tree with zero warnings allowed.
std = "lua54"
-- Methods may ignore `self`.
self = false
max_line_length = 80

-- The sandbox's globals are the standard ones of the libraries a session
-- opens (base, table, string, math, utf8, coroutine); io, os and debug do
-- not exist there, so library, rubric and environment code must not use
-- them.
local sandbox = {
  globals = {},
  read_globals = {
    "assert", "collectgarbage", "error", "getmetatable", "ipairs", "load",
    "next", "pairs", "pcall", "print", "rawequal", "rawget", "rawlen",
    "rawset", "require", "select", "setmetatable", "tonumber", "tostring",
    "type", "xpcall", "_G", "_VERSION",
    "coroutine", "math", "string", "table", "utf8", "package",
  },
}
stds.ludo_sandbox = sandbox

files["lua/"] = { std = "ludo_sandbox" }
files["rubrics/"] = { std = "ludo_sandbox" }
files["features/"] = { std = "ludo_sandbox" }
files["examples/*/env.lua"] = { std = "ludo_sandbox" }
files["examples/*/policy.lua"] = { std = "ludo_sandbox" }
files["spec/fixtures/"] = { std = "ludo_sandbox" }
files["spec/"] = { std = "+busted" }
files["examples/tutorial/quiz/"] = { std = "ludo_sandbox" }
files["examples/tutorial/policy.lua"] = { std = "ludo_sandbox" }
files["examples/tutorial/quiz_spec.lua"] = { std = "+busted" }

-- Fixtures that are broken on purpose (syntax errors a test expects).
exclude_files = {
  "spec/fixtures/c/syntax_error/env.lua",
  "spec/fixtures/functional/helper_syntax/broken.lua",
  "spec/fixtures/functional/syntax_error/env.lua",
}
