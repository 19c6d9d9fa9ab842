-- ludo: the module environment authors require inside a session.
--
--   local ludo = require("ludo")
--   ludo.null            JSON null sentinel
--   ludo.json            encode/decode/array (C bridge)
--   ludo.sleep(s)        wait s seconds without blocking other sessions
--   ludo.now()           monotonic seconds
--   ludo.log(level, ...) log a line ("debug"|"info"|"warn"|"error")
--   ludo.uuid()          random UUID v4
--   ludo.async           await/gather for waiting primitives
--   ludo.re              pcre2 regular expressions (loaded on first use)
local core = require("ludo.core")
local async = require("ludo.async")

local M = {
  null = require("ludo.null"),
  json = require("ludo.json"),
  async = async,
  now = core.now,
  uuid = core.uuid,
}

local await, core_sleep = async.await, core.sleep

-- Waits `seconds` (>= 0) inside a session call; other sessions run
-- meanwhile.
function M.sleep(seconds)
  await(core_sleep(seconds))
end

-- Logs the tostring() of the arguments joined by tabs at `level`.
function M.log(level, ...)
  local n = select("#", ...)
  local parts = {}
  for i = 1, n do parts[i] = tostring((select(i, ...))) end
  core.log(level, table.concat(parts, "\t"))
end

return setmetatable(M, {
  __index = function(t, k)
    if k == "re" then
      local re = require("ludo.re")
      rawset(t, "re", re)
      return re
    end
  end,
})
