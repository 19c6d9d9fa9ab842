-- ludo.eval.page: the HTML page of an evaluation report (report.html):
-- one self-contained file, inline CSS and SVG, no script, nothing fetched.
-- Every string from the run, the environment or an error goes through
-- ludo.eval.html's escape; charts bin or subsample so that 100,000
-- episodes give a page of the same size as 2,000.
local H = require("ludo.eval.html")
local svg = require("ludo.eval.svg")
local stats = require("ludo.eval.stats")
local summary = require("ludo.eval.summary")
local jsontext = require("ludo.jsontext")

local M = {}

local format, concat, sort, floor, min = string.format, table.concat,
  table.sort, math.floor, math.min
local esc, num, opt = H.escape, H.num, summary.opt

-- At most this many points are drawn over the episode index; more
-- episodes are averaged in buckets.
M.MAX_POINTS = 2000
-- Buckets when there are more episodes than MAX_POINTS.
M.BUCKETS = 500
-- Rows of the slowest-episodes table and of the failing-episodes table.
M.SLOWEST = 15
M.MAX_FAILING = 200
-- Characters of an error message or configuration value shown.
M.MAX_TEXT = 400

local CSS = [[
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
color:#1f2328;background:#f6f8fa;margin:0}
main{max-width:1180px;margin:0 auto;padding:20px 24px 48px}
h1{font-size:24px;margin:8px 0 2px}h2{font-size:18px;margin:28px 0 8px;
border-bottom:1px solid #d0d7de;padding-bottom:4px}
h3{font-size:15px;margin:4px 0 6px}
.sub{color:#57606a;margin:0 0 12px}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(170px,1fr));
gap:10px}
.card{background:#fff;border:1px solid #d0d7de;border-radius:6px;
padding:10px 12px}.card .v{font-size:22px;font-weight:600}
.card .k{color:#57606a;font-size:12px;text-transform:uppercase;
letter-spacing:.04em}.card .d{color:#57606a;font-size:12px}
.grid2{display:grid;grid-template-columns:1fr 1fr;gap:14px}
.panel{background:#fff;border:1px solid #d0d7de;border-radius:6px;
padding:10px 12px;min-width:0}
table{border-collapse:collapse;width:100%;background:#fff;font-size:13px}
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;
vertical-align:top}th{background:#eaeef2;font-weight:600}
h1,.sub{overflow-wrap:anywhere}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
td.id{overflow-wrap:anywhere;max-width:300px}.nw{white-space:nowrap}
table.facts{width:auto;min-width:640px}table.facts th{width:220px}
tr:nth-child(even) td{background:#f9fafb}
td.msg{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;
font-size:12px;white-space:pre-wrap;word-break:break-word;max-width:520px}
td.cfg{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;
font-size:12px;word-break:break-all}
.note{color:#57606a;font-size:12px;margin:4px 0}
.ok{color:#1a7f37}.bad{color:#cf222e}.warn{color:#9a6700}
svg.chart{width:100%;height:auto;display:block}
svg .grid{stroke:#eaeef2}svg .axis{stroke:#57606a}
svg .tickmark{stroke:#57606a}
svg text{font-size:12px;fill:#1f2328}svg .tick{fill:#57606a}
svg .label{font-size:13px;fill:#1f2328}
svg .empty{fill:#8c959f;font-size:16px}
svg .bar{fill:#4e79a7}svg .bar:hover{fill:#2f5b8a}
svg .whisker{stroke:#1f2328;stroke-width:1.5;fill:none}
svg .point{fill:#4e79a7;fill-opacity:.6}
svg .line{stroke:#e15759;stroke-width:2;fill:none}
#errors-chart .bar{fill:#e15759}
.legend{font-size:12px;color:#57606a}.legend i{display:inline-block;
width:18px;height:3px;vertical-align:middle;margin:0 4px 0 10px}
footer{color:#8c959f;font-size:12px;margin-top:32px}
]]

-- The numbers of a statistics object of summary.json as table cells.
local function stat_cells(d)
  local ci = opt(d.ci95)
  return format('<td class="n">%s</td><td class="n">%s</td>'
    .. '<td class="n">%s</td><td class="n">%s</td><td class="n">%s</td>'
    .. '<td class="n">%s</td>', num(d.n), num(opt(d.mean)), num(opt(d.std)),
    ci and (num(ci[1]) .. " \u{2013} " .. num(ci[2])) or "\u{2013}",
    num(opt(d.min)), num(opt(d.max)))
end

-- The header cells of stat_cells.
local STAT_HEAD = '<th class="n">n</th><th class="n">mean</th>'
  .. '<th class="n">std</th><th class="n">95% CI (t)</th>'
  .. '<th class="n">min</th><th class="n">max</th>'

-- Sorted keys of table `t`.
local function keys(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  sort(out, function(a, b) return tostring(a) < tostring(b) end)
  return out
end

-- `s` cut to `n` (default M.MAX_TEXT) bytes, not splitting a UTF-8
-- sequence, with an ellipsis when cut.
local function clip(s, n)
  s = tostring(s)
  n = n or M.MAX_TEXT
  if #s <= n then return s end
  local cut = n
  while cut > 0 and (s:byte(cut + 1) or 0) & 0xC0 == 0x80 do
    cut = cut - 1
  end
  return s:sub(1, cut) .. "\u{2026}"
end

-- Characters of a task id or error class shown in a table (the whole
-- id is the cell's tooltip).
M.MAX_ID = 60

-- A trajectory cell: a link when the path is a safe relative one.
local function traj_cell(r)
  local p = opt(r.trajectory)
  if p == nil then return "<td>\u{2013}</td>" end
  if H.safe_href(p) then
    return format('<td class="nw"><a class="traj" href="%s">%s</a></td>',
      esc(p), esc(p))
  end
  return '<td class="id">' .. esc(clip(p, M.MAX_ID)) .. "</td>"
end

-- A cell for an id (task, error class): cut to M.MAX_ID characters,
-- whole in the tooltip, wrapping anywhere; with `short`, an id of at most
-- that many characters does not wrap (error classes: "ETIMEOUT").
local function id_cell(v, short)
  v = opt(v)
  if v == nil then return '<td class="id">\u{2013}</td>' end
  local s = tostring(v)
  if short and #s <= short then
    return '<td class="nw">' .. esc(s) .. "</td>"
  end
  if #s <= M.MAX_ID then return '<td class="id">' .. esc(s) .. "</td>" end
  return format('<td class="id" title="%s">%s</td>', esc(clip(s)),
    esc(clip(s, M.MAX_ID)))
end

local function card(key, value, detail)
  return format('<div class="card"><div class="k">%s</div><div class="v">'
    .. '%s</div><div class="d">%s</div></div>', esc(key), value,
    detail or "")
end

-- The key figures at the top.
local function cards(s)
  local ep, rw, su = s.episodes, s.reward, s.success
  local out = { '<div class="cards">' }
  out[#out + 1] = card("episodes", num(ep.recorded),
    format("%s finished, %s failed, %s cancelled%s of %s",
      num(ep.finished), num(ep.failed), num(ep.cancelled),
      (opt(ep.lost) or 0) > 0 and format(", %s lost (server outage)",
        num(ep.lost)) or "", num(ep.total)))
  local ci = opt(rw.ci95)
  out[#out + 1] = card("mean reward", num(opt(rw.mean)),
    ci and format("95%% CI %s \u{2013} %s", num(ci[1]), num(ci[2]))
    or format("n = %s", num(rw.n)))
  local sci = opt(su.ci95)
  out[#out + 1] = card("success rate",
    opt(su.rate) and (num(su.rate * 100, 3) .. "%") or "\u{2013}",
    format("%s of %s%s", num(su.successes), num(su.n), sci and
      format(", CI %s\u{2013}%s%%", num(sci[1] * 100, 3),
        num(sci[2] * 100, 3)) or ""))
  for _, p in ipairs(s.pass_at_k) do
    out[#out + 1] = card("pass@" .. p.k, opt(p.value) and
      (num(p.value * 100, 3) .. "%") or "\u{2013}",
      format("over %s tasks", num(p.tasks)))
  end
  out[#out + 1] = card("mean steps", num(opt(s.steps.mean)),
    format("%s steps in all", num(s.steps.total)))
  local t = s.timing or {}
  out[#out + 1] = card("throughput", num(opt(t.episodes_per_s)) ..
    " ep/s", format("%s steps/s: %s episodes in %s s", num(opt(
      t.steps_per_s)), num(opt(t.episodes_run)), num(opt(t.wall_s))))
  out[#out + 1] = "</div>"
  return concat(out)
end

-- The run's configuration: one row per field of run.json.
local function config_table(run)
  local out = { "<table><tr><th>field</th><th>value</th></tr>" }
  for _, k in ipairs(keys(run)) do
    local v = run[k]
    local text
    if type(v) == "string" then
      text = v
    else
      text = jsontext.try_encode(v) or tostring(v)
    end
    out[#out + 1] = format('<tr><td>%s</td><td class="cfg">%s</td></tr>',
      esc(k), esc(clip(text)))
  end
  if #out == 1 then
    out[#out + 1] = '<tr><td colspan="2">(no configuration)</td></tr>'
  end
  out[#out + 1] = "</table>"
  return concat(out)
end

-- The statistics table: total reward, each rubric path, steps.
local function stats_table(s)
  local out = { "<table><tr><th>score</th>" .. STAT_HEAD .. "</tr>" }
  out[#out + 1] = "<tr><th>total reward</th>" .. stat_cells(s.reward)
    .. "</tr>"
  for _, path in ipairs(keys(s.rubrics)) do
    out[#out + 1] = "<tr><td>" .. esc(path) .. "</td>"
      .. stat_cells(s.rubrics[path]) .. "</tr>"
  end
  out[#out + 1] = "<tr><th>steps per episode</th>" .. stat_cells(s.steps)
    .. "</tr></table>"
  out[#out + 1] = '<p class="note">Rewards and rubric scores over the '
    .. "finished episodes (no error); steps over finished and failed ones. "
    .. "std is the sample standard deviation; the interval is mean \u{b1} "
    .. "t(0.975, n\u{2212}1)\u{b7}std/\u{221a}n.</p>"
  return concat(out)
end

-- Said after the episodes timed when the process that wrote the summary
-- ran fewer attempts than the records hold (a --resume: the earlier
-- processes' episodes are not in its timing), else nothing.
local function resumed_note(s, ran)
  local ep = s.episodes or {}
  local attempts = (opt(ep.finished) or 0) + (opt(ep.failed) or 0)
  if ran == nil or ran >= attempts then return "" end
  return format(", this run's only: a resume (%s attempts in all)",
    num(attempts))
end

-- Small key/value tables: success, pass@k, errors, invalid actions, LLM
-- usage and timing.
local function facts_table(s)
  local rows = {}
  local function row(k, v) rows[#rows + 1] = format(
    '<tr><th>%s</th><td>%s</td></tr>', esc(k), v) end
  local su = s.success
  row("success rate", opt(su.rate) and format("%s (%s of %s)",
    num(su.rate), num(su.successes), num(su.n)) or "\u{2013}")
  local sci = opt(su.ci95)
  if sci then
    row("success 95% CI (Wilson)", num(sci[1]) .. " \u{2013} " ..
      num(sci[2]))
  end
  for _, p in ipairs(s.pass_at_k) do
    row("pass@" .. p.k, format("%s (%s tasks, %s with fewer than %s "
      .. "attempts left out)", num(opt(p.value)), num(p.tasks),
      num(p.tasks_too_few_attempts), num(p.k)))
  end
  local ia = s.invalid_actions
  row("invalid actions", format("%s in %s episodes (%s per step)",
    num(ia.total), num(ia.episodes), num(opt(ia.per_step))))
  local l = s.llm
  row("LLM calls", format("%s (%s failed)", num(l.calls), num(l.failures)))
  row("LLM tokens", format("%s prompt, %s completion",
    num(l.prompt_tokens), num(l.completion_tokens)))
  local t = s.timing or {}
  row("started at", esc(opt(t.started_at) or "\u{2013}"))
  row("wall time", num(opt(t.wall_s)) .. " s")
  row("episodes timed", format("%s (%s steps)%s", num(opt(t.episodes_run)),
    num(opt(t.steps_run)), resumed_note(s, opt(t.episodes_run))))
  row("episodes/s", num(opt(t.episodes_per_s)))
  row("steps/s", num(opt(t.steps_per_s)))
  local ew = t.episode_wall_ms or {}
  row("episode wall time", format("mean %s ms, p50 %s, p95 %s, max %s",
    num(opt(ew.mean)), num(opt(ew.p50)), num(opt(ew.p95)),
    num(opt(ew.max))))
  row("CPU time (all episodes)", num(opt(t.cpu_ms_total)) .. " ms")
  return '<table class="facts">' .. concat(rows) .. "</table>"
end

-- The reward histogram and the episode-length histogram.
local function histograms(eps)
  local rewards, steps = {}, {}
  for _, r in ipairs(eps) do
    local st = summary.status(r)
    if st == "finished" and opt(r.reward) ~= nil then
      rewards[#rewards + 1] = r.reward
    end
    if not summary.rerun(st) and opt(r.steps) ~= nil then
      steps[#steps + 1] = r.steps
    end
  end
  local re, rc = stats.bins(rewards)
  local se, sc = stats.bins(steps)
  local ints = true
  for _, x in ipairs(rewards) do
    if x ~= floor(x) then ints = false; break end
  end
  return svg.histogram({ id = "reward-hist", title = "Total reward",
      edges = re, counts = rc, xlabel = "total reward per episode",
      ylabel = "episodes", integer = ints and #rc > 0 and re[2] - re[1] == 1,
    }),
    svg.histogram({ id = "steps-hist", title = "Episode length",
      edges = se, counts = sc, xlabel = "steps per episode",
      ylabel = "episodes", integer = #sc > 0 and se[2] - se[1] == 1 })
end

-- The per-rubric bars: mean with the 95% CI as whiskers.
local function rubric_bars(s)
  local items = {}
  for _, path in ipairs(keys(s.rubrics)) do
    local d = s.rubrics[path]
    local ci = opt(d.ci95)
    if opt(d.mean) ~= nil then
      items[#items + 1] = { label = path, value = d.mean,
        lo = ci and ci[1], hi = ci and ci[2],
        tip = format("%s: mean %s, 95%% CI %s, n = %d", path, num(d.mean),
          ci and (num(ci[1]) .. " \u{2013} " .. num(ci[2])) or "\u{2013}",
          d.n) }
    end
  end
  return svg.hbars({ id = "rubric-bars", title = "Rubric scores",
    items = items, xlabel = "mean score per episode (whiskers: 95% CI)",
    empty = "no rubric scores" })
end

-- Reward over the episode index: each finished episode's reward (or, past
-- M.MAX_POINTS episodes, the mean of each of M.BUCKETS buckets) and the
-- running mean. Returns the chart and a note on what a point is.
local function reward_series(eps)
  local xs, ys = {}, {}
  for _, r in ipairs(eps) do
    if summary.status(r) == "finished" and opt(r.reward) ~= nil then
      xs[#xs + 1], ys[#ys + 1] = r.episode, r.reward
    end
  end
  local n = #xs
  local pts, line, note = {}, {}, "one point per finished episode"
  local sum = 0.0
  if n <= M.MAX_POINTS then
    for i = 1, n do
      sum = sum + ys[i]
      pts[i] = { xs[i], ys[i], format("episode %d: reward %s", xs[i],
        num(ys[i])) }
      line[i] = { xs[i], sum / i }
    end
  else
    local b = M.BUCKETS
    note = format("each point is the mean reward of %s consecutive "
      .. "finished episodes (%s in all)", num(n // b), num(n))
    for k = 1, b do
      local i0, i1 = (k - 1) * n // b + 1, k * n // b
      local bs, bx = 0.0, 0.0
      for i = i0, i1 do
        bs, bx = bs + ys[i], bx + xs[i]
        sum = sum + ys[i]
      end
      local m = i1 - i0 + 1
      pts[k] = { bx / m, bs / m, format("episodes %d\u{2013}%d: mean "
        .. "reward %s", xs[i0], xs[i1], num(bs / m)) }
      line[k] = { xs[i1], sum / i1 }
    end
  end
  return svg.series({ id = "reward-series", title = "Reward over episodes",
    points = pts, line = line, xlabel = "episode", ylabel = "total reward",
    integer_x = true,
    line_label = "running mean" }), note
end

-- Errors by class as bars (and the cancelled and lost episodes).
local function error_bars(s)
  local items = {}
  for _, cls in ipairs(keys(s.errors)) do
    items[#items + 1] = { label = cls, value = s.errors[cls],
      tip = format("%s: %d episodes", cls, s.errors[cls]) }
  end
  if s.episodes.cancelled > 0 then
    items[#items + 1] = { label = "cancelled (ECANCELED)",
      value = s.episodes.cancelled,
      tip = format("cancelled: %d episodes", s.episodes.cancelled) }
  end
  local lost = opt(s.episodes.lost) or 0
  if lost > 0 then
    items[#items + 1] = { label = "lost (server outage)", value = lost,
      tip = format("lost to a server outage (ECONNECT, EDISCONNECTED, "
        .. "ENOREPLY, ECAPACITY): %d episodes, to run again with --resume",
        lost) }
  end
  return svg.hbars({ id = "errors-chart", title = "Errors by class",
    items = items, xlabel = "episodes", label_width = 200, integer = true,
    empty = "no errors" })
end

-- True when record `a` was slower than `b` (ties: the lower episode).
local function slower(a, b)
  if a.wall_ms ~= b.wall_ms then return a.wall_ms > b.wall_ms end
  return a.episode < b.episode
end

-- The M.SLOWEST episodes by wall time, slowest first: one pass keeping
-- the top few in order (no sort of every episode).
local function slowest_table(eps)
  local list = {}
  for _, r in ipairs(eps) do
    if opt(r.wall_ms) ~= nil and (#list < M.SLOWEST or
        slower(r, list[#list])) then
      local i = #list < M.SLOWEST and #list + 1 or #list
      while i > 1 and slower(r, list[i - 1]) do
        list[i] = list[i - 1]
        i = i - 1
      end
      list[i] = r
    end
  end
  local out = { '<table><tr><th class="n">episode</th><th>task</th>'
    .. '<th class="n">wall ms</th><th class="n">cpu ms</th>'
    .. '<th class="n">steps</th><th class="n">reward</th><th>status</th>'
    .. "<th>trajectory</th></tr>" }
  for i = 1, min(#list, M.SLOWEST) do
    local r = list[i]
    out[#out + 1] = format('<tr><td class="n">%d</td>%s'
      .. '<td class="n">%s</td><td class="n">%s</td><td class="n">%s</td>'
      .. '<td class="n">%s</td><td class="nw">%s</td>%s</tr>', r.episode,
      id_cell(r.task), num(r.wall_ms),
      num(opt(r.cpu_ms)), num(opt(r.steps)), num(opt(r.reward)),
      summary.status(r), traj_cell(r))
  end
  if #list == 0 then
    out[#out + 1] = '<tr><td colspan="8">(no episodes)</td></tr>'
  end
  out[#out + 1] = "</table>"
  return concat(out)
end

-- Episodes with an error, then cancelled and lost ones, then those finished
-- without success, each group by episode (`eps` is in episode order).
local function failing_table(eps)
  local groups = { failed = {}, cancelled = {}, lost = {}, finished = {} }
  for _, r in ipairs(eps) do
    local st = summary.status(r)
    if st ~= "finished" or opt(r.success) == false then
      local g = groups[st]
      g[#g + 1] = r
    end
  end
  local list = groups.failed
  for _, name in ipairs({ "cancelled", "lost", "finished" }) do
    for _, r in ipairs(groups[name]) do list[#list + 1] = r end
  end
  local out = { '<table id="failing"><tr><th class="n">episode</th>'
    .. '<th>task</th><th>status</th><th>error</th><th>message</th>'
    .. '<th class="n">steps</th><th class="n">reward</th>'
    .. "<th>trajectory</th></tr>" }
  for i = 1, min(#list, M.MAX_FAILING) do
    local r = list[i]
    local st = summary.status(r)
    local err = opt(r.error) or {}
    local cls = st == "finished" and "unsuccessful" or st
    out[#out + 1] = format('<tr><td class="n">%d</td>%s'
      .. '<td class="%s nw">%s</td>%s<td class="msg">%s</td>'
      .. '<td class="n">%s</td><td class="n">%s</td>%s</tr>', r.episode,
      id_cell(r.task), summary.rerun(st) and "warn" or "bad", cls,
      st == "finished" and "<td></td>" or id_cell(err.class, 24),
      esc(clip(opt(err.message) or "")),
      num(opt(r.steps)), num(opt(r.reward)), traj_cell(r))
  end
  if #eps == 0 then
    out[#out + 1] = '<tr><td colspan="8">(no episodes)</td></tr>'
  elseif #list == 0 then
    out[#out + 1] = '<tr><td colspan="8" class="ok">(none: every episode '
      .. "finished with success)</td></tr>"
  end
  out[#out + 1] = "</table>"
  if #list > M.MAX_FAILING then
    out[#out + 1] = format('<p class="note">%s more not shown: see '
      .. "results.jsonl.</p>", num(#list - M.MAX_FAILING))
  end
  return concat(out)
end

-- The policy of run.json in a few words: its file, its model, or JSON.
local function policy_text(p)
  if p == nil then return "\u{2013}" end
  if type(p) ~= "table" then return tostring(p) end
  local kind = opt(p.kind)
  if kind == "lua" and type(opt(p.file)) == "string" then
    return "Lua, " .. p.file
  end
  if kind == "llm" and type(opt(p.model)) == "string" then
    local api = type(opt(p.api)) == "string" and (p.api .. " ") or ""
    return "LLM, " .. api .. p.model
  end
  return jsontext.try_encode(p) or "?"
end

-- Returns the page for `run` (run.json's object), `s` (the summary as a
-- table) and `eps` (the deduplicated records sorted by episode).
function M.render(run, s, eps)
  local env = opt(run.env)
  local title = "ludo eval"
  if env ~= nil then title = title .. ": " .. tostring(env) end
  local reward_h, steps_h = histograms(eps)
  local series, series_note = reward_series(eps)
  local t = s.timing or {}
  return concat({
    "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
    '<meta name="viewport" content="width=device-width,initial-scale=1">',
    '<link rel="icon" href="data:,">',
    "<title>", esc(title), "</title><style>", CSS, "</style></head>",
    "<body><main><h1>", esc(title), "</h1>",
    '<p class="sub">policy: ', esc(clip(policy_text(opt(run.policy)))),
    " \u{b7} seed ", esc(tostring(opt(run.seed) or "\u{2013}")),
    " \u{b7} started ", esc(opt(t.started_at) or "\u{2013}"), "</p>",
    cards(s),
    "<h2>Scores</h2>", stats_table(s),
    '<div class="grid2" style="margin-top:14px"><div class="panel">',
    "<h3>Total reward</h3>", reward_h, "</div><div class=\"panel\">",
    "<h3>Episode length</h3>", steps_h, "</div></div>",
    '<h2>Rubric scores</h2><div class="panel">', rubric_bars(s), "</div>",
    '<h2>Reward over episodes</h2><div class="panel">', series,
    '<p class="legend"><i style="background:#4e79a7"></i>', esc(series_note),
    '<i style="background:#e15759"></i>running mean</p></div>',
    "<h2>Errors by class</h2>",
    '<div class="panel">', error_bars(s), "</div>",
    "<h2>Run facts</h2>", facts_table(s),
    "<h2>Failing episodes</h2>", failing_table(eps),
    "<h2>Slowest episodes</h2>", slowest_table(eps),
    "<h2>Configuration</h2>", config_table(run),
    "<footer>Written by ludo eval. summary.json holds these figures; "
      .. "results.jsonl every episode.</footer>",
    "</main></body></html>\n",
  })
end

return M
