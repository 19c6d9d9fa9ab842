-- Loaded by busted before any spec: makes the source tree's Lua modules and
-- the built C modules ($LUDO_BUILD/cmod, default build/cmod; `make asan`
-- sets build-asan) reachable from a stock lua5.4.
local root = os.getenv("LUDO_ROOT") or "."
local build = os.getenv("LUDO_BUILD") or "build"
package.path = table.concat({
  root .. "/lua/?.lua", root .. "/lua/?/init.lua", root .. "/?.lua",
  root .. "/spec/?.lua", package.path,
}, ";")
if build:sub(1, 1) ~= "/" then build = root .. "/" .. build end
package.cpath = build .. "/cmod/?.so;" .. package.cpath
