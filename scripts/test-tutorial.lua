-- Keeps docs/tutorial.md true: checks that each file it shows (a ```lua
-- block after a line "File `path`:") is examples/tutorial/<path> byte for
-- byte and that it shows every file of that folder, then runs its ```sh
-- blocks, in order and in one shell started at the repository root, and
-- compares what each prints with the ```text block that follows it (the
-- seconds busted reports are not compared). A command block must succeed
-- and print nothing on stderr.
-- Usage: lua5.4 scripts/test-tutorial.lua BUILD (run by scripts/test.sh,
-- which counts its "ok NAME" / "FAIL NAME" lines). BUILD's ludo is on the
-- PATH behind the tutorial's own `export PATH=...`, so a tree with only
-- build-asan/ runs it too.
local build = arg[1] or "build"
local DOC, DIR = "docs/tutorial.md", "examples/tutorial/"

local failed = false
local function say(ok, name, detail)
  print((ok and "ok " or "FAIL ") .. "tutorial: " .. name)
  if not ok then
    failed = true
    if detail then io.write((detail:gsub("[^\n]+", "    %0")), "\n") end
  end
end

local function slurp(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function sh_quote(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

-- The fenced blocks of the tutorial: {lang=, text=, label=}, where label
-- is the last non-blank line before the fence.
local doc = assert(slurp(DOC), "cannot read " .. DOC)
local blocks, label, cur = {}, nil, nil
for line in doc:gmatch("([^\n]*)\n") do
  if cur then
    if line == "```" then
      blocks[#blocks + 1] = cur
      cur, label = nil, nil
    else
      cur.text = cur.text .. line .. "\n"
    end
  elseif line:match("^```") then
    cur = { lang = line:sub(4), text = "", label = label }
  elseif line:match("%S") then
    label = line
  end
end
say(cur == nil, DOC .. " has no unclosed code block")

-- 1. The files shown are the files.
local shown = {}
for _, b in ipairs(blocks) do
  local path = b.label and b.label:match("^File `([^`]+)`:$")
  if path then
    shown[path] = true
    local real = slurp(DIR .. path)
    say(real == b.text, "the " .. path .. " shown is " .. DIR .. path,
      real and "the block and the file differ" or "no such file")
  end
end
local p = io.popen("cd " .. DIR .. " && find . -type f | sort")
for f in p:lines() do
  f = f:sub(3)
  say(shown[f], DOC .. " shows " .. DIR .. f)
end
p:close()

-- 2. The commands print what the tutorial says.
local tmp = io.popen("mktemp -d"):read("l")
local steps, script = {}, { "set -u", 'export PATH="$PWD/' .. build
  .. ':$PATH"' }
for i, b in ipairs(blocks) do
  if b.lang == "sh" then
    local n = #steps + 1
    local expect = blocks[i + 1] and blocks[i + 1].lang == "text"
      and blocks[i + 1].text
    steps[n] = { text = b.text, expect = expect }
    local out = tmp .. "/" .. n
    script[#script + 1] = "{\n" .. b.text .. "} >" .. out .. ".out 2>"
      .. out .. ".err; echo $? >" .. out .. ".rc"
  end
end
local f = assert(io.open(tmp .. "/run.sh", "w"))
f:write(table.concat(script, "\n"), "\n")
f:close()
os.execute("bash " .. sh_quote(tmp .. "/run.sh"))

local function normal(s)
  return (s:gsub("[%d.]+ seconds", "N seconds"))
end
for n, st in ipairs(steps) do
  local base = tmp .. "/" .. n
  local out, err = slurp(base .. ".out") or "", slurp(base .. ".err") or ""
  local rc = (slurp(base .. ".rc") or "?"):gsub("%s+", "")
  local name = "runs `" .. st.text:gsub("\n$", ""):gsub("\n", "; ") .. "`"
  local ok = rc == "0" and err == ""
    and (not st.expect or normal(out) == normal(st.expect))
  local detail = ("exit %s\n-- stdout:\n%s-- stderr:\n%s-- expected:\n%s")
    :format(rc, out, err, st.expect or "(anything)\n")
  say(ok, name, detail)
end
os.execute("rm -rf " .. sh_quote(tmp))
os.exit(failed and 1 or 0)
