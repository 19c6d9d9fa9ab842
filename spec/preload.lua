-- Loaded by busted before any spec: makes the source tree's Lua modules and
-- the built C modules (build/cmod) reachable from a stock lua5.4.
local root = os.getenv("LUDO_ROOT") or "."
package.path = table.concat({
  root .. "/lua/?.lua", root .. "/lua/?/init.lua", root .. "/?.lua",
  root .. "/spec/?.lua", package.path,
}, ";")
package.cpath = root .. "/build/cmod/?.so;" .. package.cpath
