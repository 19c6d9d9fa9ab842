-- Specs for the summary of `ludo eval` (ludo.eval.stats,
-- ludo.eval.summary, ludo.eval.report.summary): statistics against
-- hand-computed values, pass@k, determinism under any order, duplicate
-- records of an episode, empty input and wrong input.
local stats = require("ludo.eval.stats")
local summary = require("ludo.eval.summary")
local report = require("ludo.eval.report")
local json = require("ludo.json")
local null = require("ludo.null")

-- Decodes summary text, mapping ludo.null to nil for easy asserts.
local function decode(text)
  local v = assert(json.decode(text))
  local function strip(t)
    for k, x in pairs(t) do
      if getmetatable(x) == "ludo.null" then
        t[k] = nil
      elseif type(x) == "table" then
        strip(x)
      end
    end
    return t
  end
  return strip(v)
end

local function close(want, got, tol)
  assert.is_number(got)
  assert.is_true(math.abs(want - got) <= (tol or 1e-9),
    string.format("want %.12g, got %.12g", want, got))
end

-- A result record with defaults; `t` overrides fields.
local function rec(t)
  local r = {
    episode = 0, task = null, ["repeat"] = 0, seed = 1, steps = 3,
    reward = 1.0, rubrics = {}, done = true, truncated = false,
    success = true, invalid_actions = 0, error = null, wall_ms = 1.0,
    cpu_ms = 1.0, llm = { calls = 0, failures = 0, prompt_tokens = 0,
      completion_tokens = 0 }, trajectory = null,
  }
  for k, v in pairs(t) do r[k] = v end
  return r
end

-- The summary text without its "timing" key.
local function untimed(text)
  return (text:gsub(',"timing":%b{}', ""))
end

describe("ludo.eval.stats", function()
  it("gives Student's t quantiles (0.975) to 1e-7", function()
    -- Reference values of the t distribution's tables.
    local want = { [1] = 12.7062047, [2] = 4.3026527, [3] = 3.1824463,
      [10] = 2.2281389, [30] = 2.0422725, [100] = 1.9839715,
      [1000] = 1.9623391 }
    for df, t in pairs(want) do close(t, stats.t975(df), 1e-7) end
  end)

  it("agrees between the series and the expansion", function()
    local series = { stats.t975(60), stats.t975(150), stats.t975(200) }
    local saved = stats.T_SERIES_MAX
    stats.T_SERIES_MAX = 50
    local ok, expansion = pcall(function()
      return { stats.t975(60), stats.t975(150), stats.t975(200) }
    end)
    stats.T_SERIES_MAX = saved
    assert.is_true(ok, expansion)
    for i = 1, 3 do close(series[i], expansion[i], 1e-9) end
    close(1.959963985, stats.t975(10 ^ 9), 1e-8)
  end)

  it("describes 1, 2, 3, 4: mean, sample std, t interval", function()
    local d = stats.describe({ 1, 2, 3, 4 })
    assert.are.equal(4, d.n)
    close(2.5, d.mean)
    close(math.sqrt(5 / 3), d.std, 1e-9)
    -- 2.5 -+ t(0.975, 3) * sqrt(5/3) / 2, t = 3.18244630528
    close(0.4457397432, d.ci95[1], 1e-9)
    close(4.554260257, d.ci95[2], 1e-9)
    assert.are.equal(1.0, d.min)
    assert.are.equal(4.0, d.max)
  end)

  it("leaves out what one or no value cannot give", function()
    local one = stats.describe({ 7 })
    assert.are.same({ n = 1, mean = 7.0, min = 7.0, max = 7.0 }, one)
    assert.are.same({ n = 0 }, stats.describe({}))
  end)

  it("gives equal values their value as mean and a std of 0", function()
    for _, v in ipairs({ 48.8, 0.1, -3.3, 1e-7 }) do
      local xs = {}
      for i = 1, 100000 do xs[i] = v end
      local d = stats.describe(xs)
      assert.are.equal(v, d.mean)
      assert.are.equal(0.0, d.std)
      assert.are.same({ v, v }, d.ci95)
    end
  end)

  it("takes a spread of rounding noise for none", function()
    local ulp = 6.46 * 2 ^ -52
    local d = stats.describe({ 6.46, 6.46 + ulp, 6.46, 6.46 - ulp })
    assert.are.equal(0.0, d.std)
    assert.are.same({ 6.46, 6.46 }, d.ci95)
    -- a real spread of 1e-9 stays, and one small beside large values:
    -- 1e9 + 0, 1e-3, 2e-3 (about 2,000 units in the last place)
    assert.is_true(stats.describe({ 6.46, 6.46 + 1e-9 }).std > 0)
    close(1e-3, stats.describe({ 1e9, 1e9 + 1e-3, 1e9 + 2e-3 }).std, 1e-6)
  end)

  it("keeps precision where the one-pass formula loses it", function()
    local xs = {}
    for i = 1, 1000 do xs[i] = 1e9 + (i % 2) end
    -- values 1e9 and 1e9+1 alternating: std = sqrt(0.25 * 1000 / 999)
    close(math.sqrt(250 / 999), stats.describe(xs).std, 1e-9)
  end)

  it("gives the Wilson interval, inside [0, 1] at 0 and n", function()
    local w = stats.wilson(0, 10)
    assert.are.equal(0.0, w[1])
    close(0.2775327998, w[2], 1e-9)
    w = stats.wilson(10, 10)
    close(0.7224672002, w[1], 1e-9)
    assert.are.equal(1.0, w[2])
    w = stats.wilson(5, 10)
    close(1 - w[2], w[1], 1e-12)
  end)

  it("estimates pass@k as 1 - C(n-c,k)/C(n,k)", function()
    close(0.7, stats.pass_at_k(5, 2, 2), 1e-12)     -- 1 - 3/10
    close(0.4, stats.pass_at_k(5, 2, 1), 1e-12)     -- c/n
    assert.are.equal(0.0, stats.pass_at_k(10, 0, 3))
    assert.are.equal(1.0, stats.pass_at_k(10, 10, 3))
    assert.are.equal(1.0, stats.pass_at_k(10, 8, 3)) -- n-c < k
    assert.is_nil(stats.pass_at_k(3, 1, 4))          -- k > n
    -- Exact fractions (Python's math.comb): no overflow at large n.
    close(0.43844221105527637, stats.pass_at_k(200, 2, 50), 1e-12)
    close(0.02970129403488079, stats.pass_at_k(100000, 3, 1000), 1e-12)
  end)

  it("interpolates quantiles as numpy does", function()
    close(2.5, stats.quantile({ 4, 1, 3, 2 }, 0.5))
    close(3.85, stats.quantile({ 1, 2, 3, 4 }, 0.95))
    assert.is_nil(stats.quantile({}, 0.5))
  end)

  it("bins integers one per value and reals in sqrt(n) bins", function()
    local edges, counts = stats.bins({ 3, 5, 5, 4, 3, 3 })
    assert.are.same({ 2.5, 3.5, 4.5, 5.5 }, edges)
    assert.are.same({ 3, 1, 2 }, counts)
    local xs = {}
    for i = 1, 100 do xs[i] = i / 7 end
    edges, counts = stats.bins(xs)
    assert.are.equal(10, #counts)
    local sum = 0
    for _, c in ipairs(counts) do sum = sum + c end
    assert.are.equal(100, sum)
    close(100 / 7, edges[#edges], 1e-9)
    assert.are.same({ { 4.5, 5.5 }, { 1 } }, { stats.bins({ 5.0 }) })
  end)

  it("rounds to 10 significant digits and drops NaN", function()
    assert.are.equal(0.3, stats.round(0.1 + 0.2))
    assert.are.equal("float", math.type(stats.round(3)))
    assert.is_nil(stats.round(0 / 0))
    assert.is_nil(stats.round(math.huge))
  end)
end)

describe("ludo.eval.summary", function()
  local results = {
    rec({ episode = 2, reward = 4.0, steps = 5, rubrics = { a = 2.0 },
      invalid_actions = 2, llm = { calls = 2, failures = 1,
        prompt_tokens = 30, completion_tokens = 7 } }),
    rec({ episode = 0, reward = 1.0, steps = 1, rubrics = { a = 1.0,
      ["b/c"] = 0.5 }, success = false }),
    rec({ episode = 1, reward = 2, steps = 3, rubrics = { a = 0.0 } }),
    rec({ episode = 3, reward = 9.0, steps = 4, success = false,
      error = { class = "ETIMEOUT", message = "slow" } }),
    rec({ episode = 4, reward = 0.0, steps = 2, success = false,
      error = { class = "ECANCELED", message = "Ctrl-C" } }),
    rec({ episode = 5, reward = 0.0, steps = 0, success = false,
      error = { class = "ETIMEOUT", message = "slow" } }),
  }
  local run = { episodes_total = 8, pass_k = json.array() }

  it("computes reward and rubric statistics over finished episodes",
    function()
      local s = decode(report.summary(run, results, {}))
      -- rewards 1, 2, 4: mean 7/3, std sqrt(7/3), t(0.975, 2) = 4.30265
      assert.are.equal(3, s.reward.n)
      close(2.333333333, s.reward.mean)
      close(1.527525232, s.reward.std)
      close(-1.461249700, s.reward.ci95[1], 1e-9)
      close(6.127916367, s.reward.ci95[2], 1e-9)
      assert.are.equal(1.0, s.reward.min)
      assert.are.equal(4.0, s.reward.max)
      assert.are.equal(3, s.rubrics.a.n)
      close(1.0, s.rubrics.a.mean)
      assert.are.same({ n = 1, mean = 0.5, min = 0.5, max = 0.5 },
        s.rubrics["b/c"])
    end)

  it("counts episodes, errors, steps, invalid actions, LLM usage",
    function()
      local s = decode(report.summary(run, results, {}))
      assert.are.same({ total = 8, recorded = 6, finished = 3, failed = 2,
        cancelled = 1, lost = 0, missing = 3 }, s.episodes)
      assert.are.same({ ETIMEOUT = 2 }, s.errors)
      -- steps of the finished and failed episodes: 1 3 5 4 0
      assert.are.equal(5, s.steps.n)
      assert.are.equal(13, s.steps.total)
      close(2.6, s.steps.mean)
      assert.are.equal(2, s.invalid_actions.total)
      assert.are.equal(1, s.invalid_actions.episodes)
      close(2 / 13, s.invalid_actions.per_step)
      assert.are.same({ calls = 2, failures = 1, prompt_tokens = 30,
        completion_tokens = 7 }, s.llm)
      -- 2 successes out of the 5 not cancelled
      assert.are.equal(5, s.success.n)
      assert.are.equal(2, s.success.successes)
      close(0.4, s.success.rate)
    end)

  it("puts time under timing only", function()
    local s = decode(report.summary(run, results,
      { wall_s = 2.0, started_at = "2026-12-01T10:00:00Z" }))
    close(2.5, s.timing.episodes_per_s) -- 5 episodes (not cancelled) / 2 s
    close(6.5, s.timing.steps_per_s)
    assert.are.equal("2026-12-01T10:00:00Z", s.timing.started_at)
    close(6.0, s.timing.cpu_ms_total)
    local a = report.summary(run, results, { wall_s = 2.0 })
    local b = report.summary(run, results, { wall_s = 3.5,
      started_at = "x" })
    assert.are_not.equal(a, b)
    assert.are.equal(untimed(a), untimed(b))
    assert.is_truthy(a:find('^{.*,"timing":{.*},"version":1}\n$'))
  end)

  it("measures the throughput over the episodes the process ran",
    function()
      -- a resume: 2 attempts of 3 steps ran in 2 s, the 5 attempts of the
      -- records were written by this process and an earlier one
      local s = decode(report.summary(run, results,
        { wall_s = 2.0, episodes = 2, steps = 3 }))
      assert.are.equal(2, s.timing.episodes_run)
      assert.are.equal(3, s.timing.steps_run)
      close(1.0, s.timing.episodes_per_s)
      close(1.5, s.timing.steps_per_s)
      -- nothing ran (a resume of a finished run): no rate
      s = decode(report.summary(run, results,
        { wall_s = 0.01, episodes = 0, steps = 0 }))
      assert.are.equal(0, s.timing.episodes_run)
      assert.is_nil(s.timing.episodes_per_s)
      assert.is_nil(s.timing.steps_per_s)
      -- without counts: every attempt of the records
      s = decode(report.summary(run, results, { wall_s = 2.0 }))
      assert.are.equal(5, s.timing.episodes_run)
      assert.are.equal(13, s.timing.steps_run)
      assert.has_error(function()
        report.summary(run, results, { wall_s = 1.0, episodes = -1 })
      end, "ludo.eval.summary: timing.episodes must be a whole number >= 0"
        .. " (got -1)")
    end)

  it("averages pass@k over tasks with enough attempts", function()
    local rs = {}
    local function add(task, ok)
      rs[#rs + 1] = rec({ episode = #rs, task = task, success = ok })
    end
    add("A", true); add("A", false); add("A", false)
    add("B", true); add("B", true); add("B", true)
    add("C", false)
    local s = decode(report.summary({ pass_k = { 2, 1, 5 } }, rs, {}))
    assert.are.equal(3, #s.pass_at_k)
    local p1, p2, p5 = s.pass_at_k[1], s.pass_at_k[2], s.pass_at_k[3]
    -- k = 1: A 1/3, B 1, C 0
    assert.are.same({ 1, 3, 0 }, { p1.k, p1.tasks,
      p1.tasks_too_few_attempts })
    close(4 / 9, p1.value)
    -- k = 2: A 1 - C(2,2)/C(3,2) = 2/3, B 1; C has 1 attempt
    assert.are.same({ 2, 2, 1 }, { p2.k, p2.tasks,
      p2.tasks_too_few_attempts })
    close(5 / 6, p2.value)
    -- k = 5: no task has 5 attempts
    assert.are.same({ k = 5, tasks = 0, tasks_too_few_attempts = 3 }, p5)
  end)

  it("groups records without a task by seed for pass@k", function()
    local rs = {
      rec({ episode = 0, seed = 11, success = true }),
      rec({ episode = 1, seed = 11, success = false }),
      rec({ episode = 2, seed = 12, success = false }),
      rec({ episode = 3, seed = 12, success = false }),
    }
    local s = decode(report.summary({ pass_k = { 2 } }, rs, {}))
    assert.are.equal(2, s.pass_at_k[1].tasks)
    close(0.5, s.pass_at_k[1].value)
  end)

  it("gives the same text for the records in any order", function()
    local rs = {}
    math.randomseed(42)
    for i = 0, 199 do
      local err = i % 17 == 0 and { class = "EX" .. (i % 3),
        message = "m" } or null
      rs[#rs + 1] = rec({ episode = i, task = "t" .. (i % 9),
        reward = math.random() * 10 - 3, steps = math.random(1, 50),
        rubrics = { x = math.random(), ["y/z"] = math.random() },
        success = math.random() < 0.5, error = err,
        wall_ms = math.random() * 100 })
    end
    local want = report.summary({ pass_k = { 1, 3 } }, rs, { wall_s = 1 })
    for _ = 1, 5 do
      local shuffled = {}
      for i, r in ipairs(rs) do shuffled[i] = r end
      for i = #shuffled, 2, -1 do
        local j = math.random(i)
        shuffled[i], shuffled[j] = shuffled[j], shuffled[i]
      end
      assert.are.equal(want, report.summary({ pass_k = { 1, 3 } },
        shuffled, { wall_s = 1 }))
    end
  end)

  it("writes integer and float rewards alike", function()
    local a = report.summary({}, { rec({ reward = 3 }) }, {})
    local b = report.summary({}, { rec({ reward = 3.0 }) }, {})
    assert.are.equal(a, b)
    assert.is_truthy(a:find('"mean":3.0', 1, true))
  end)

  describe("duplicate records of an episode", function()
    local cancelled = rec({ episode = 1, reward = 0.0, success = false,
      error = { class = "ECANCELED", message = "Ctrl-C" } })
    local rerun = rec({ episode = 1, reward = 5.0 })
    local other = rec({ episode = 0, reward = 1.0 })

    it("keep the re-run over the cancelled one, in any order", function()
      local want = report.summary({}, { other, rerun }, {})
      assert.are.equal(want, report.summary({}, { other, cancelled, rerun },
        {}))
      assert.are.equal(want, report.summary({}, { rerun, other, cancelled },
        {}))
      local s = decode(want)
      assert.are.equal(0, s.episodes.cancelled)
      assert.are.equal(2, s.episodes.recorded)
    end)

    it("keep the later of two of the same standing", function()
      local later = rec({ episode = 1, reward = 0.0, success = false,
        error = { class = "ECANCELED", message = "again" } })
      local eps = summary.episodes({ cancelled, later })
      assert.are.equal(1, #eps)
      assert.are.equal(later, eps[1])
      eps = summary.episodes({ rerun, rec({ episode = 1, reward = 6.0 }) })
      assert.are.equal(6.0, eps[1].reward)
    end)
  end)

  describe("episodes a server outage lost (ECONNECT, EDISCONNECTED)",
    function()
      local function lost(ep, cls)
        return rec({ episode = ep, reward = 0.0, steps = 1, success = false,
          llm = { calls = 1, failures = 1, prompt_tokens = 3,
            completion_tokens = 0 },
          error = { class = cls, message = cls .. ": gone" } })
      end
      local ok = rec({ episode = 0, reward = 1.0, steps = 2,
        success = true })
      local failed = rec({ episode = 1, reward = 0.0, steps = 1,
        success = false, error = { class = "ESCRIPT", message = "x" } })
      local all = { ok, failed, lost(2, "ECONNECT"),
        lost(3, "EDISCONNECTED") }

      it("are counted apart: not attempts, not errors, missing", function()
        assert.are.equal("lost", summary.status(all[3]))
        assert.are.equal("lost", summary.status(all[4]))
        local s = decode(report.summary({ episodes_total = 4,
          pass_k = { 1 } }, all, {}))
        assert.are.same({ total = 4, recorded = 4, finished = 1,
          failed = 1, cancelled = 0, lost = 2, missing = 2 }, s.episodes)
        assert.are.same({ ESCRIPT = 1 }, s.errors)
        assert.are.equal(2, s.success.n)
        close(0.5, s.success.rate)
        assert.are.equal(2, s.steps.n)
        close(0.5, s.pass_at_k[1].value) -- 1 success in 2 attempts
        assert.are.equal(2, s.llm.calls) -- their tokens were spent
      end)

      it("lose to a final record of the episode, in any order", function()
        local again = rec({ episode = 2, reward = 1.0, steps = 2,
          success = true })
        local want = report.summary({}, { ok, failed, again }, {})
        local a = decode(report.summary({}, { ok, failed, lost(2,
          "ECONNECT"), again }, {}))
        local b = decode(report.summary({}, { again, ok, lost(2,
          "ECONNECT"), failed }, {}))
        a.llm, b.llm = nil, nil
        local w = decode(want)
        w.llm = nil
        assert.are.same(w, a)
        assert.are.same(w, b)
      end)
    end)

  it("summarises no results", function()
    local s = decode(report.summary({}, {}, {}))
    assert.are.same({ total = 0, recorded = 0, finished = 0, failed = 0,
      cancelled = 0, lost = 0, missing = 0 }, s.episodes)
    assert.are.same({ n = 0 }, s.reward)
    assert.are.same({}, s.rubrics)
    assert.are.same({}, s.errors)
    assert.are.same({ n = 0, successes = 0 }, s.success)
    assert.are.same({ n = 0, total = 0 }, s.steps)
    local text = report.summary({ episodes_total = 4, pass_k = { 1 } },
      json.array(), json.decode('{"wall_s":0.0,"started_at":null}'))
    assert.is_truthy(text:find('"missing":4', 1, true))
    assert.is_truthy(text:find('"pass_at_k":[{"k":1,"tasks":0,'
      .. '"tasks_too_few_attempts":0,"value":null}]', 1, true))
    assert.is_truthy(text:find('"episodes_per_s":null', 1, true))
  end)

  it("reads records decoded from JSON (ludo.null, arrays)", function()
    local rs = json.decode('[{"episode":0,"task":null,"repeat":0,'
      .. '"seed":5,"steps":2,"reward":1.5,"rubrics":{"a":1.5},'
      .. '"done":true,"truncated":false,"success":true,'
      .. '"invalid_actions":0,"error":null,"wall_ms":1.0,"cpu_ms":0.5,'
      .. '"llm":null,"trajectory":null}]')
    local s = decode(report.summary(json.decode('{"pass_k":[1],'
      .. '"shard":null}'), rs, json.decode('{"wall_s":1.0}')))
    close(1.5, s.reward.mean)
    assert.are.equal(1.0, s.pass_at_k[1].value)
  end)

  describe("refuses wrong input, naming the field", function()
    local cases = {
      { "results not an array", "x", "results must be an array" },
      { "a record not an object", { 5 },
        "results[1] must be an object (got number)" },
      { "an episode not an integer", { rec({}), rec({ episode = "3" }) },
        'results[2].episode must be an integer (got "3")' },
      { "a float episode", { rec({ episode = 1.5 }) },
        "results[1].episode must be an integer (got 1.5)" },
      { "a reward not a number", { rec({ reward = "high" }) },
        'results[1].reward must be a number (got "high")' },
      { "an error without class", { rec({ error = { message = "m" } }) },
        "results[1].error must be null or an object with a string class" },
      { "rubric scores not numbers", { rec({ rubrics = { a = "x" } }) },
        "results[1].rubrics must be an object of numbers" },
      { "success not a boolean", { rec({ success = 1 }) },
        "results[1].success must be a boolean (got 1)" },
    }
    for _, case in ipairs(cases) do
      it(case[1], function()
        local ok, err = pcall(report.summary, {}, case[2], {})
        assert.is_false(ok)
        assert.is_truthy(err:find(case[3], 1, true), err)
        assert.is_truthy(err:find("^ludo.eval.summary: "), err)
      end)
    end

    it("a bad pass_k", function()
      local ok, err = pcall(report.summary, { pass_k = { 0 } }, {}, {})
      assert.is_false(ok)
      assert.is_truthy(err:find("run.pass_k[1] must be an integer >= 1",
        1, true), err)
    end)
  end)
end)
