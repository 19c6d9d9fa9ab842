-- Specs for the HTML report of `ludo eval` (ludo.eval.report.html,
-- ludo.eval.page, ludo.eval.svg, ludo.eval.html): a self-contained page,
-- hostile strings escaped, the charts' marks counted, 0, 1 and 100,000
-- episodes. The page in a real browser: spec/report/report_test.py.
local report = require("ludo.eval.report")
local svg = require("ludo.eval.svg")
local H = require("ludo.eval.html")
local null = require("ludo.null")

local function rec(t)
  local r = {
    episode = 0, task = null, ["repeat"] = 0, seed = 1, steps = 3,
    reward = 1.0, rubrics = {}, done = true, truncated = false,
    success = true, invalid_actions = 0, error = null, wall_ms = 1.0,
    cpu_ms = 1.0, llm = null, trajectory = null,
  }
  for k, v in pairs(t) do r[k] = v end
  return r
end

local function page(run, results)
  return report.html(run, report.summary(run, results,
    { wall_s = 1.0, started_at = "2026-12-01T10:00:00Z" }), results)
end

-- The opening tag of the chart with id `id`.
local function chart_tag(html, id)
  return html:match('<svg class="chart" id="' .. id:gsub("%-", "%%-")
    .. '"[^>]*>')
end

local function attr(tag, name)
  return tonumber(tag:match(" " .. name .. '="([^"]*)"'))
end

-- The text of the chart with id `id`.
local function chart(html, id)
  local s = html:find('<svg class="chart" id="' .. id .. '"', 1, true)
  local e = html:find("</svg>", s, true)
  return html:sub(s, e + 5)
end

local function count(s, pat)
  local n = 0
  for _ in s:gmatch(pat) do n = n + 1 end
  return n
end

-- n synthetic records: rewards and steps from a fixed generator, a few
-- errors and cancellations, two rubric paths.
local function synthetic(n)
  local rs = {}
  local x = 12345
  local function rnd()
    x = (x * 1103515245 + 12345) % 2147483648
    return x / 2147483648
  end
  for i = 0, n - 1 do
    local err = null
    if i % 31 == 7 then err = { class = "ETIMEOUT", message = "slow" } end
    if i % 97 == 5 then err = { class = "ECANCELED", message = "stop" } end
    local a, b = rnd(), rnd()
    rs[#rs + 1] = rec({ episode = i, task = "t" .. (i % 50),
      ["repeat"] = i // 50, reward = a + b, steps = 1 + (i % 23),
      rubrics = { ["q/a"] = a, fmt = b }, success = a > 0.3, error = err,
      wall_ms = rnd() * 50, trajectory = string.format(
        "trajectories/%06d.jsonl", i) })
  end
  return rs
end

describe("ludo.eval.report.html", function()
  it("is one self-contained page: no script, nothing fetched", function()
    local html = page({ env = "examples/echo", pass_k = { 1 } },
      synthetic(60))
    assert.is_truthy(html:find("^<!DOCTYPE html>\n<html"))
    assert.is_truthy(html:find("</html>\n$"))
    assert.is_falsy(html:lower():find("<script", 1, true))
    assert.is_falsy(html:find(" src=", 1, true))
    assert.is_falsy(html:find("url(", 1, true))
    assert.is_falsy(html:find("@import", 1, true))
    -- every href is a relative trajectory path or the empty favicon
    for href in html:gmatch(' href="([^"]*)"') do
      assert.is_truthy(href == "data:," or
        href:find("^trajectories/%d+%.jsonl$"), href)
    end
  end)

  it("draws each chart with its marks counted", function()
    local rs = synthetic(60)
    local html = page({ pass_k = { 1 } }, rs)
    local finished, attempts = 0, 0
    for _, r in ipairs(rs) do
      if r.error == null then finished = finished + 1 end
      if r.error == null or r.error.class ~= "ECANCELED" then
        attempts = attempts + 1
      end
    end
    -- reward histogram: the bars' counts add up to the finished episodes
    local hist = chart(html, "reward-hist")
    local sum, bars = 0, 0
    for c in hist:gmatch('<rect class="bar" data%-count="(%d+)"') do
      sum, bars = sum + tonumber(c), bars + 1
    end
    assert.are.equal(finished, sum)
    assert.are.equal(attr(chart_tag(html, "reward-hist"), "data%-bars"),
      bars)
    assert.is_true(bars >= 5)
    -- steps 1..23: one bar per value over the episodes not cancelled
    local steps = chart(html, "steps-hist")
    assert.are.equal(23, count(steps, '<rect class="bar"'))
    sum = 0
    for c in steps:gmatch('data%-count="(%d+)"') do sum = sum + c end
    assert.are.equal(attempts, sum)
    -- one bar and one whisker per rubric path
    local rub = chart(html, "rubric-bars")
    assert.are.equal(2, count(rub, '<rect class="bar"'))
    assert.are.equal(2, count(rub, '<path class="whisker"'))
    -- a point per finished episode and the running mean
    local series = chart(html, "reward-series")
    assert.are.equal(finished, count(series, '<circle class="point"'))
    assert.are.equal(1, count(series, '<path class="line"'))
    -- errors: ETIMEOUT and the cancelled ones
    local errs = chart(html, "errors-chart")
    assert.are.equal(2, count(errs, '<rect class="bar"'))
    assert.is_truthy(errs:find(">ETIMEOUT<", 1, true))
  end)

  it("escapes hostile strings everywhere", function()
    local evil = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    local rs = {
      rec({ episode = 0, task = evil, rubrics = { [evil] = 1.0 },
        error = { class = evil, message = evil .. "\0\27" },
        success = false, trajectory = "javascript:alert(1)" }),
      rec({ episode = 1, task = "t'\"&", trajectory = "../../etc/passwd",
        wall_ms = 99.0 }),
      rec({ episode = 2, trajectory = "/abs/path.jsonl", wall_ms = 98.0 }),
    }
    local html = page({ env = evil, policy = evil, [evil] = evil }, rs)
    assert.is_falsy(html:find("<script", 1, true))
    assert.is_falsy(html:find("<img", 1, true))
    assert.is_falsy(html:find("\0", 1, true))
    assert.is_falsy(html:find("\27", 1, true))
    assert.is_truthy(html:find("&lt;script&gt;alert(&quot;x&quot;)"
      .. "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;", 1, true))
    assert.is_truthy(html:find("t&#39;&quot;&amp;", 1, true))
    -- unsafe trajectory paths are shown, never linked
    assert.is_falsy(html:find('href="javascript', 1, true))
    assert.is_falsy(html:find('href="../', 1, true))
    assert.is_falsy(html:find('href="/abs', 1, true))
    assert.is_truthy(html:find('<td class="id">javascript:alert(1)</td>', 1,
      true))
  end)

  it("cuts long ids, keeping the whole one in the tooltip", function()
    local long = "task-" .. string.rep("x", 200)
    local html = page({}, { rec({ episode = 0, task = long,
      success = false, error = { class = "ETIMEOUT", message = "m" } }) })
    assert.is_truthy(html:find('<td class="id" title="' .. long .. '">'
      .. long:sub(1, 60) .. "\u{2026}</td>", 1, true))
    assert.is_truthy(html:find('<td class="nw">ETIMEOUT</td>', 1, true))
  end)

  it("decides which paths may be links", function()
    assert.is_true(H.safe_href("trajectories/000017.jsonl"))
    assert.is_true(H.safe_href("a/b-c_d.e"))
    for _, p in ipairs({ "", "/x", "../x", "a/../b", "javascript:x",
      "http://h/x", "a b", "a\"b", "//h/x" }) do
      assert.is_false(H.safe_href(p), p)
    end
    assert.is_false(H.safe_href(nil))
  end)

  it("lists the slowest episodes, slowest first", function()
    local rs = {}
    for i = 0, 39 do
      rs[#rs + 1] = rec({ episode = i, wall_ms = (i * 7919) % 40 + 0.5 })
    end
    local html = page({}, rs)
    local s = html:find("<h2>Slowest episodes</h2>", 1, true)
    local e = html:find("</table>", s, true)
    local walls = {}
    for w in html:sub(s, e):gmatch('<td class="n">%d+</td><td class="id">'
      .. '[^<]*</td><td class="n">([%d.]+)</td>') do
      walls[#walls + 1] = tonumber(w)
    end
    local want = {}
    for i = 1, 15 do want[i] = 40 - i + 0.5 end
    assert.are.same(want, walls)
  end)

  it("handles no episodes", function()
    local html = page({}, {})
    for _, id in ipairs({ "reward-hist", "steps-hist", "rubric-bars",
      "reward-series", "errors-chart" }) do
      assert.is_truthy(chart_tag(html, id), id)
    end
    assert.are.equal(0, count(html, '<rect class="bar"'))
    assert.are.equal(0, count(html, '<circle class="point"'))
    assert.is_truthy(html:find(">no data<", 1, true))
    assert.is_truthy(html:find("(no episodes)", 1, true))
  end)

  it("handles one episode", function()
    local html = page({}, { rec({ episode = 0, reward = 2.5,
      rubrics = { a = 2.5 }, trajectory = "trajectories/000000.jsonl" }) })
    assert.are.equal(1, count(chart(html, "reward-hist"),
      '<rect class="bar"'))
    assert.are.equal(1, count(chart(html, "reward-series"),
      '<circle class="point"'))
    -- one value: a bar without a whisker (no interval)
    local rub = chart(html, "rubric-bars")
    assert.are.equal(1, count(rub, '<rect class="bar"'))
    assert.are.equal(0, count(rub, '<path class="whisker"'))
    assert.is_truthy(html:find('href="trajectories/000000.jsonl"', 1, true))
  end)

  it("says the timing is a resume's own only for a resumed run",
    function()
    local rs = { rec({ episode = 0 }), rec({ episode = 1 }),
      rec({ episode = 2 }) }
    local function timed(timing)
      return report.html({}, report.summary({}, rs, timing), rs)
    end
    local whole = timed({ wall_s = 1.0, episodes = 3, steps = 9 })
    assert.is_truthy(whole:find("<td>3 (9 steps)</td>", 1, true))
    assert.is_falsy(whole:find("resume", 1, true))
    assert.is_falsy(page({}, rs):find("resume", 1, true))
    local resumed = timed({ wall_s = 1.0, episodes = 1, steps = 3 })
    assert.is_truthy(resumed:find("1 (3 steps), this run's only: a "
      .. "resume (3 attempts in all)", 1, true))
  end)

  it("bins 100,000 episodes into a page under 2 MB", function()
    local rs = synthetic(100000)
    local run = { pass_k = { 1, 5 }, episodes_total = 100000 }
    local text = report.summary(run, rs, { wall_s = 10.0 })
    local html = report.html(run, text, rs)
    assert.is_true(#html < 2 * 1024 * 1024, #html)
    -- no bigger than five times the page of 2,000 episodes
    local small = page(run, synthetic(2000))
    assert.is_true(#html < 5 * #small, #html .. " vs " .. #small)
    local series = chart(html, "reward-series")
    assert.are.equal(500, count(series, '<circle class="point"'))
    assert.is_true(count(chart(html, "reward-hist"), '<rect class="bar"')
      <= 40)
    -- the failing table stops at 200 rows and says how many are left
    assert.is_truthy(html:find("more not shown: see results.jsonl", 1,
      true))
  end)

  it("refuses a summary_text that is not a summary", function()
    local ok, err = pcall(report.html, {}, "{", {})
    assert.is_false(ok)
    assert.is_truthy(err:find("summary_text is not a summary: EPARSE", 1,
      true), err)
    ok, err = pcall(report.html, {}, '{"version":99}', {})
    assert.is_false(ok)
    assert.is_truthy(err:find("has version 99", 1, true), err)
    ok, err = pcall(report.html, {}, nil, {})
    assert.is_false(ok)
    assert.is_truthy(err:find("must be the text of summary.json", 1, true))
  end)
end)

describe("ludo.eval.svg", function()
  it("chooses nice ticks covering the range", function()
    local t, step = svg.ticks(0.34, 2.79, 6)
    assert.are.equal(0.5, step)
    assert.are.same({ 0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0 }, t)
    t, step = svg.ticks(0, 3, 8, true)
    assert.are.equal(1, step)
    assert.are.equal(0.0, t[1])
    t = svg.ticks(5, 5)
    assert.is_true(t[1] < 5 and t[#t] > 5)
    -- a range within rounding noise is padded like a single value
    t = svg.ticks(48.8, 48.8 + 1e-13, 5)
    assert.is_true(t[1] <= 48 and t[#t] >= 49.5, t[1] .. " " .. t[#t])
    t = svg.ticks(-7, 12, 5)
    assert.is_true(t[1] <= -7 and t[#t] >= 12)
  end)

  it("draws one visible bar for equal values, however large", function()
    local stats = require("ludo.eval.stats")
    for _, v in ipairs({ -1e300, 1e17, 3.0, 0.25 }) do
      local edges, counts = stats.bins({ v, v, v })
      local s = svg.histogram({ id = "h", edges = edges, counts = counts })
      local bar = s:match('<rect class="bar"[^>]*>')
      assert.is_truthy(bar, s)
      assert.is_true(tonumber(attr(bar, "width")) >= 50, bar)
      assert.are.equal(3, attr(bar, "data%-count"))
    end
  end)

  it("writes huge tick labels short, within the chart's margin",
    function()
      assert.are.equal("-1.8e300", svg.tick_text(-1.8e300, 2e299))
      assert.are.equal("2e-5", svg.tick_text(2e-5, 1e-5))
      assert.are.equal("1.5e6", svg.tick_text(1.5e6, 5e5))
      local s = svg.series({ id = "s", points = { { 0, -1e300 },
        { 1, -1.7e300 }, { 2, -2e300 } } })
      local n = 0
      for x, text in s:gmatch('<text class="tick" x="([%d.]+)" y="[%d.]+" '
        .. 'text%-anchor="end">([^<]*)</text>') do
        -- 12 px text (~7 px a character) right-aligned at x: clear of
        -- the rotated axis label (at x 14, ~13 px tall)
        assert.is_true(tonumber(x) - 7 * #text >= 21, x .. " " .. text)
        n = n + 1
      end
      assert.is_true(n >= 3, s)
    end)

  it("escapes labels and titles", function()
    local s = svg.hbars({ id = "x", title = "<t>", items = { { label = "&",
      value = 1 } }, xlabel = '"' })
    assert.is_truthy(s:find("<title>&lt;t&gt;</title>", 1, true))
    assert.is_truthy(s:find(">&amp;<", 1, true))
    assert.is_truthy(s:find(">&quot;</text>", 1, true))
  end)
end)
