-- ludo.eval.report: the summary (summary.json) and the report
-- (report.html) of a `ludo eval` run, as a script module the runner
-- calls with JSON arguments (docs/eval-report.md):
--
--   summary(run, results, timing) -> the text of summary.json
--   html(run, summary_text, results) -> the text of report.html
--
-- `run` is run.json's object, `results` the result records of
-- results.jsonl in any order, `timing` = {wall_s, started_at, episodes,
-- steps} (the last process's wall time and what it ran). Wrong input
-- raises an error naming the field ("ludo.eval.summary: results[3].episode
-- must be an integer (got "x")").
local summary = require("ludo.eval.summary")
local page = require("ludo.eval.page")
local json = require("ludo.json")

local M = {}

-- Returns the text of summary.json: sorted keys, floats rounded to 10
-- significant digits, everything time-dependent under "timing".
function M.summary(run, results, timing)
  return summary.text(run, results, timing)
end

-- Returns the text of report.html for `run`, `summary_text` (as summary()
-- returned it) and `results` (the same records).
function M.html(run, summary_text, results)
  if type(summary_text) ~= "string" then
    error("ludo.eval.report: summary_text must be the text of summary.json"
      .. " (got " .. type(summary_text) .. ")", 0)
  end
  local s, err = json.decode(summary_text)
  if type(s) ~= "table" then
    error("ludo.eval.report: summary_text is not a summary: "
      .. tostring(err or "not an object"), 0)
  end
  if summary.opt(s.version) ~= summary.VERSION then
    error("ludo.eval.report: summary_text has version "
      .. tostring(summary.opt(s.version)) .. ", this report reads "
      .. summary.VERSION, 0)
  end
  run = summary.opt(run) or {}
  if type(run) ~= "table" then
    error("ludo.eval.report: run must be an object (got " .. type(run)
      .. ")", 0)
  end
  return page.render(run, s, summary.episodes(results))
end

return M
