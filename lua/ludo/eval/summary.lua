-- ludo.eval.summary: the summary of an evaluation run (summary.json) from
-- its result records (docs/eval-report.md lists every field).
--
-- Records are checked, deduplicated by episode and sorted by episode
-- before anything is summed, so the same records in any order give the
-- same text byte for byte. Everything that depends on time (wall and CPU
-- times, throughput, the start) is under the one key "timing".
local stats = require("ludo.eval.stats")
local null = require("ludo.null")
local jsontext = require("ludo.jsontext")

local M = {}

local type, pairs, ipairs, error, tostring, getmetatable = type, pairs,
  ipairs, error, tostring, getmetatable
local mtype, format, sort = math.type, string.format, table.sort
local round = stats.round

-- Format version of summary.json; bumped when a field changes meaning.
M.VERSION = 1

-- The error class of episodes stopped by Ctrl-C: counted apart from the
-- other errors, and replaced by a later record of the same episode.
M.CANCELED = "ECANCELED"

-- The error classes of a server outage, not the policy's doing: a
-- transport that failed (the server could not be reached, went away, did
-- not reply in time) or a server at its session limit (ECAPACITY). Such an
-- episode is "lost": counted apart, as a cancelled one, and --resume runs
-- it again (docs/eval.md); counting it as a failed attempt would lower
-- the success rate for what the server did.
-- The list is runtime/cli/eval_output.c's lost_classes too.
M.LOST = { ECONNECT = true, EDISCONNECTED = true, ENOREPLY = true,
  ECAPACITY = true }

-- Returns `v`, or nil when it is nil or ludo.null (JSON null). The
-- sentinel is also known by its protected metatable, as a host that
-- reloads ludo.null (busted between spec files) may hand in another one.
local function opt(v)
  if v == null or getmetatable(v) == "ludo.null" then return nil end
  return v
end
M.opt = opt

local function bad(i, field, want, v)
  error(format("ludo.eval.summary: results[%d].%s must be %s (got %s)",
    i, field, want, type(v) == "string" and format("%q", v) or tostring(v)),
    0)
end

-- Checks the fields of record `r` (index `i` in the input) that the
-- summary reads; raises naming the first wrong one.
local function check_record(r, i)
  if type(r) ~= "table" then
    error(format("ludo.eval.summary: results[%d] must be an object (got %s)",
      i, type(r)), 0)
  end
  if mtype(r.episode) ~= "integer" then
    bad(i, "episode", "an integer", r.episode)
  end
  local err = opt(r.error)
  if err ~= nil and (type(err) ~= "table" or type(err.class) ~= "string") then
    bad(i, "error", "null or an object with a string class", err)
  end
  for _, k in ipairs({ "reward", "wall_ms", "cpu_ms" }) do
    local v = opt(r[k])
    if v ~= nil and type(v) ~= "number" then bad(i, k, "a number", v) end
  end
  for _, k in ipairs({ "steps", "invalid_actions", "repeat" }) do
    local v = opt(r[k])
    if v ~= nil and mtype(v) ~= "integer" then
      bad(i, k, "an integer", v)
    end
  end
  local rub = opt(r.rubrics)
  if rub ~= nil then
    if type(rub) ~= "table" then bad(i, "rubrics", "an object", rub) end
    for path, v in pairs(rub) do
      if type(path) ~= "string" or (opt(v) ~= nil and type(v) ~= "number")
      then
        bad(i, "rubrics", "an object of numbers", tostring(path))
      end
    end
  end
  local s = opt(r.success)
  if s ~= nil and type(s) ~= "boolean" then
    bad(i, "success", "a boolean", s)
  end
  local llm = opt(r.llm)
  if llm ~= nil and type(llm) ~= "table" then
    bad(i, "llm", "an object", llm)
  end
end

-- "finished", "failed", "cancelled" or "lost": the standing of record
-- `r`.
function M.status(r)
  local err = opt(r.error)
  if err == nil then return "finished" end
  if err.class == M.CANCELED then return "cancelled" end
  if M.LOST[err.class] then return "lost" end
  return "failed"
end

-- True for a standing whose episode is to run again (cancelled, lost):
-- not an attempt, and a later final record replaces it.
local function rerun(st) return st == "cancelled" or st == "lost" end
M.rerun = rerun

-- True for a standing that is an attempt (finished, failed).
function M.attempt(r) return not rerun(M.status(r)) end

-- Returns the records of `results` (an array, any order) checked, one
-- per episode and sorted by episode. When an episode has several
-- records (a resumed run re-ran a cancelled or lost episode), a final
-- record (finished, failed) wins over one to run again (cancelled, lost),
-- and otherwise the later one in `results` wins.
function M.episodes(results)
  if type(results) ~= "table" then
    error("ludo.eval.summary: results must be an array of records (got "
      .. type(results) .. ")", 0)
  end
  local by_ep, order = {}, {}
  for i = 1, #results do
    local r = results[i]
    check_record(r, i)
    local prev = by_ep[r.episode]
    if prev == nil then
      order[#order + 1] = r.episode
      by_ep[r.episode] = r
    elseif not rerun(M.status(r)) or rerun(M.status(prev)) then
      by_ep[r.episode] = r
    end
  end
  sort(order)
  local out = {}
  for i, ep in ipairs(order) do out[i] = by_ep[ep] end
  return out
end

-- Statistics of a list as the summary writes them: describe() with the
-- ci95 pair as a JSON array, or null when it does not exist.
local function described(xs)
  local d = stats.describe(xs)
  return {
    n = d.n, mean = d.mean or null, std = d.std or null,
    ci95 = d.ci95 and jsontext.array(d.ci95) or null,
    min = d.min or null, max = d.max or null,
  }
end

-- The reward and per-rubric statistics over the finished episodes.
local function scores(eps)
  local rewards, per_path = {}, {}
  for _, r in ipairs(eps) do
    if M.status(r) == "finished" then
      local reward = opt(r.reward)
      if reward ~= nil then rewards[#rewards + 1] = reward end
      for path, v in pairs(opt(r.rubrics) or {}) do
        v = opt(v)
        if v ~= nil then
          local xs = per_path[path]
          if xs == nil then xs = {}; per_path[path] = xs end
          xs[#xs + 1] = v
        end
      end
    end
  end
  local rubrics = jsontext.object()
  for path, xs in pairs(per_path) do rubrics[path] = described(xs) end
  return described(rewards), rubrics
end

-- The task an episode belongs to for pass@k: its task id, or for
-- records without one their seed (repeats of a seeded episode share it).
local function task_key(r)
  local task = opt(r.task)
  if task ~= nil then return "t:" .. tostring(task) end
  local seed = opt(r.seed)
  if seed ~= nil then return "s:" .. tostring(seed) end
  return "e:" .. r.episode
end

-- pass@k for each k of `ks`: per task over its attempts (finished and
-- failed episodes), averaged over the tasks with at least k attempts.
local function pass_at(eps, ks)
  local tasks, keys = {}, {}
  for _, r in ipairs(eps) do
    if M.attempt(r) then
      local key = task_key(r)
      local t = tasks[key]
      if t == nil then
        t = { n = 0, c = 0 }
        tasks[key] = t
        keys[#keys + 1] = key
      end
      t.n = t.n + 1
      if opt(r.success) == true then t.c = t.c + 1 end
    end
  end
  sort(keys)
  local sorted_ks = {}
  for i, k in ipairs(ks) do
    if mtype(k) ~= "integer" or k < 1 then
      error(format("ludo.eval.summary: run.pass_k[%d] must be an integer "
        .. ">= 1 (got %s)", i, tostring(k)), 0)
    end
    sorted_ks[#sorted_ks + 1] = k
  end
  sort(sorted_ks)
  local out = jsontext.array()
  for _, k in ipairs(sorted_ks) do
    if out[#out] == nil or out[#out].k ~= k then
      local sum, used = 0.0, 0
      for _, key in ipairs(keys) do
        local v = stats.pass_at_k(tasks[key].n, tasks[key].c, k)
        if v ~= nil then sum, used = sum + v, used + 1 end
      end
      out[#out + 1] = {
        k = k, tasks = used, tasks_too_few_attempts = #keys - used,
        value = used > 0 and round(sum / used) or null,
      }
    end
  end
  return out
end

-- Counts, steps, invalid actions, LLM usage and error classes.
local function counts(eps)
  local c = { finished = 0, failed = 0, cancelled = 0, lost = 0 }
  local errors = jsontext.object()
  local steps, successes, attempts = {}, 0, 0
  local invalid, invalid_eps, total_steps = 0, 0, 0
  local llm = { calls = 0, failures = 0, prompt_tokens = 0,
    completion_tokens = 0 }
  for _, r in ipairs(eps) do
    local st = M.status(r)
    c[st] = c[st] + 1
    if st == "failed" then
      local cls = r.error.class
      errors[cls] = (errors[cls] or 0) + 1
    end
    if not rerun(st) then
      attempts = attempts + 1
      if opt(r.success) == true then successes = successes + 1 end
      local n = opt(r.steps)
      if n ~= nil then
        steps[#steps + 1] = n
        total_steps = total_steps + n
      end
      local inv = opt(r.invalid_actions) or 0
      invalid = invalid + inv
      if inv > 0 then invalid_eps = invalid_eps + 1 end
    end
    local u = opt(r.llm)
    if u ~= nil then
      for k in pairs(llm) do
        local v = opt(u[k])
        if mtype(v) == "integer" then llm[k] = llm[k] + v end
      end
    end
  end
  return c, errors, steps, total_steps, successes, attempts, invalid,
    invalid_eps, llm
end

-- A count of `timing` (`episodes`, `steps`): a whole number >= 0, or
-- `default` when absent.
local function timing_count(timing, k, default)
  local v = opt(timing[k])
  if v == nil then return default end
  if mtype(v) ~= "integer" or v < 0 then
    error(format("ludo.eval.summary: timing.%s must be a whole number >= 0"
      .. " (got %s)", k, tostring(v)), 0)
  end
  return v
end

-- Time-dependent figures: the wall time of the process(es) that ran
-- episodes last (from `timing`), the attempts and steps they ran
-- (`timing.episodes`, `timing.steps`; absent: every attempt of the
-- records, as when one process ran them all) and their throughput, which
-- so never divides a resumed run's earlier episodes by this process's
-- time; and the episodes' own wall and CPU times.
local function timing_of(eps, timing, attempts, total_steps)
  timing = timing or {}
  local wall = opt(timing.wall_s)
  if wall ~= nil and type(wall) ~= "number" then
    error("ludo.eval.summary: timing.wall_s must be a number (got "
      .. tostring(wall) .. ")", 0)
  end
  local ran = timing_count(timing, "episodes", attempts)
  local ran_steps = timing_count(timing, "steps", total_steps)
  local started = opt(timing.started_at)
  local ms, cpu = {}, 0.0
  for _, r in ipairs(eps) do
    local w = opt(r.wall_ms)
    if w ~= nil then ms[#ms + 1] = w end
    cpu = cpu + (opt(r.cpu_ms) or 0)
  end
  -- No rate without time, nor without an episode run (a resume that
  -- found nothing left measured its setup, not a throughput).
  local per_s = function(x)
    if wall == nil or wall <= 0 or ran == 0 then return null end
    return round(x / wall)
  end
  local ep = stats.describe(ms)
  return {
    wall_s = wall and round(wall) or null,
    started_at = started ~= nil and tostring(started) or null,
    episodes_run = ran,
    steps_run = ran_steps,
    episodes_per_s = per_s(ran),
    steps_per_s = per_s(ran_steps),
    cpu_ms_total = round(cpu),
    episode_wall_ms = {
      n = ep.n, mean = ep.mean or null, max = ep.max or null,
      p50 = round(stats.quantile(ms, 0.5)) or null,
      p95 = round(stats.quantile(ms, 0.95)) or null,
    },
  }
end

-- Returns the summary as a Lua table (see the file's header).
function M.compute(run, results, timing)
  run = opt(run) or {}
  if type(run) ~= "table" then
    error("ludo.eval.summary: run must be an object (got " .. type(run)
      .. ")", 0)
  end
  local eps = M.episodes(results)
  local reward, rubrics = scores(eps)
  local c, errors, steps, total_steps, successes, attempts, invalid,
    invalid_eps, llm = counts(eps)
  local steps_d = described(steps)
  steps_d.total = total_steps
  local total = opt(run.episodes_total)
  if total ~= nil and mtype(total) ~= "integer" then
    error("ludo.eval.summary: run.episodes_total must be an integer (got "
      .. tostring(total) .. ")", 0)
  end
  local pass_k = opt(run.pass_k) or {}
  if type(pass_k) ~= "table" then
    error("ludo.eval.summary: run.pass_k must be an array of integers", 0)
  end
  return {
    version = M.VERSION,
    episodes = {
      total = total or #eps, recorded = #eps,
      finished = c.finished, failed = c.failed, cancelled = c.cancelled,
      lost = c.lost,
      missing = math.max(0, (total or #eps) - c.finished - c.failed),
    },
    reward = reward,
    rubrics = rubrics,
    success = {
      n = attempts, successes = successes,
      rate = attempts > 0 and round(successes / attempts) or null,
      ci95 = attempts > 0 and jsontext.array(stats.wilson(successes,
        attempts)) or null,
    },
    pass_at_k = pass_at(eps, pass_k),
    errors = errors,
    steps = steps_d,
    invalid_actions = {
      total = invalid, episodes = invalid_eps,
      per_step = total_steps > 0 and round(invalid / total_steps) or null,
    },
    llm = llm,
    timing = timing_of(eps, timing, attempts, total_steps),
  }
end

-- Returns the text of summary.json for `run` (run.json's object),
-- `results` (result records, any order) and `timing` ({wall_s,
-- started_at}). Raises "ludo.eval.summary: ..." naming a wrong field.
function M.text(run, results, timing)
  return jsontext.encode(M.compute(run, results, timing)) .. "\n"
end

return M
