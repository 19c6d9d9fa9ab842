-- Helpers of the functional specs that run the built `ludo` binary
-- ($LUDO_BUILD, default build/) from the source tree ($LUDO_ROOT).
local assert = require("luassert")
local M = {}

M.ROOT = os.getenv("LUDO_ROOT") or "."
if M.ROOT:sub(1, 1) ~= "/" then M.ROOT = os.getenv("PWD") .. "/" .. M.ROOT end
M.BUILD = os.getenv("LUDO_BUILD") or "build"
if M.BUILD:sub(1, 1) ~= "/" then M.BUILD = M.ROOT .. "/" .. M.BUILD end
M.LUDO = M.BUILD .. "/ludo"

function M.slurp(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

function M.spit(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

function M.exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- The word quoted for sh.
function M.quote(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

-- A new empty folder /tmp/ludo-<name>-XXXXXX (mktemp -d); remove it with
-- M.rmtmpdir when done.
function M.tmpdir(name)
  local p = assert(io.popen("mktemp -d /tmp/ludo-" .. name .. "-XXXXXX"))
  local dir = p:read("l")
  p:close()
  assert(dir and dir:find("/tmp/ludo-" .. name .. "-", 1, true) == 1,
    "mktemp -d failed")
  return dir
end

-- Removes a folder M.tmpdir made, with what it holds (nothing else).
function M.rmtmpdir(dir)
  assert(dir:match("^/tmp/ludo%-[%w%-]+%-[%w]+$"), "not a tmpdir: " .. dir)
  os.execute("rm -rf " .. M.quote(dir))
end

-- Runs a command line; returns its exit status, stdout and stderr.
function M.sh(cmdline)
  local out, err = os.tmpname(), os.tmpname()
  local _, _, code = os.execute("(" .. cmdline .. ") >" .. out .. " 2>"
    .. err)
  local o, e = M.slurp(out), M.slurp(err)
  os.remove(out)
  os.remove(err)
  return code, o, e
end

-- Runs build/ludo with the given arguments (each quoted).
function M.ludo(...)
  local parts = { M.quote(M.LUDO) }
  for _, a in ipairs({ ... }) do parts[#parts + 1] = M.quote(a) end
  return M.sh(table.concat(parts, " "))
end

-- Asserts that `hay` holds (or lacks) the plain text `needle`.
function M.contains(hay, needle)
  assert.is_truthy(hay:find(needle, 1, true),
    "'" .. hay .. "' does not contain '" .. needle .. "'")
end

function M.lacks(hay, needle)
  assert.is_falsy(hay:find(needle, 1, true),
    "'" .. hay .. "' contains '" .. needle .. "'")
end

return M
