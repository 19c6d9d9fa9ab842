-- Writes summary.json and report.html for the run.json and results.jsonl
-- of a folder, with ludo.eval.report in a stock lua5.4 (as `ludo eval`
-- does inside its script state). Used by spec/report/report_test.py.
--
-- usage (from the repository's root): lua5.4 spec/report/make_report.lua
--   IN_DIR OUT_DIR   (LUDO_BUILD names the build folder, default build)
dofile("spec/preload.lua")
local json = require("ludo.json")
local report = require("ludo.eval.report")

local in_dir, out_dir = arg[1], arg[2]
if not in_dir or not out_dir then
  io.stderr:write("usage: make_report.lua IN_DIR OUT_DIR\n")
  os.exit(2)
end

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

local run = assert(json.decode(read(in_dir .. "/run.json")))
local results = json.array()
local n = 0
for line in io.lines(in_dir .. "/results.jsonl") do
  n = n + 1
  if line ~= "" then
    results[#results + 1] = assert(json.decode(line),
      "results.jsonl line " .. n)
  end
end
local text = report.summary(run, results,
  { wall_s = 12.5, started_at = "2026-12-01T09:00:00Z" })
write(out_dir .. "/summary.json", text)
write(out_dir .. "/report.html", report.html(run, text, results))
