-- Functional specs of `ludo eval` (docs/eval.md) through the binary, for
-- defects a review found: merging into a non-empty folder says what to do
-- (merge has no --resume), a mangled line in the middle of results.jsonl
-- is said to be no record (not "episode 3 has seed -1"), the progress
-- line after Ctrl-C counts cancelled episodes apart from errors, and a
-- run file listing a task id twice is refused. The rest of `ludo eval`'s
-- tests: spec/eval/eval_test.py.
local cli = require("cliutil")
local ROOT, LUDO = cli.ROOT, cli.LUDO
local ECHO = ROOT .. "/examples/echo"
local ARITH = ROOT .. "/examples/arith"
local SLOW = ROOT .. "/spec/fixtures/eval/slow_policy.lua"
local json = require("ludo.json")
local slurp, spit, exists, quote = cli.slurp, cli.spit, cli.exists, cli.quote
local sh, ludo, contains, lacks = cli.sh, cli.ludo, cli.contains, cli.lacks

local function lines(text)
  local t = {}
  for l in text:gmatch("[^\n]+") do t[#t + 1] = l end
  return t
end

local TMP
setup(function() TMP = cli.tmpdir("eval-errors") end)
teardown(function() if TMP then cli.rmtmpdir(TMP) end end)

describe("ludo eval merge into a non-empty folder", function()
  it("says to choose a new or empty folder, not to give --resume",
    function()
      local s0, s1, m = TMP .. "/m-s0", TMP .. "/m-s1", TMP .. "/m-all"
      for i, d in ipairs({ s0, s1 }) do
        local code, _, err = ludo("eval", ECHO, "--episodes", "4",
          "--max-steps", "3", "--shard", (i - 1) .. "/2", "--out", d, "-q")
        assert.are.equal(0, code, err)
      end
      local code, _, err = ludo("eval", "merge", s0, s1, "--out", m)
      assert.are.equal(0, code, err)
      local before = slurp(m .. "/results.jsonl")
      code, _, err = ludo("eval", "merge", s0, s1, "--out", m)
      assert.are.equal(1, code, err)
      contains(err, "the output folder " .. m .. " is not empty")
      contains(err, "merge into a new or empty folder")
      lacks(err, "--resume")
      assert.are.equal(before, slurp(m .. "/results.jsonl"))
      -- what it says to do works: a new folder
      code, _, err = ludo("eval", "merge", s0, s1, "--out", m .. "-2")
      assert.are.equal(0, code, err)
    end)
end)

describe("a mangled line in the middle of results.jsonl", function()
  -- A run of 6 episodes in `d`; returns the lines of its results.jsonl.
  local function run6(d)
    local code, _, err = ludo("eval", ECHO, "--episodes", "6", "--seed",
      "5", "--max-steps", "3", "--out", d, "-q")
    assert.are.equal(0, code, err)
    return lines(slurp(d .. "/results.jsonl"))
  end

  -- Replaces line 3 of d's results.jsonl by `bad`; returns the new text.
  local function mangle(d, recs, bad)
    recs[3] = bad
    local text = table.concat(recs, "\n") .. "\n"
    spit(d .. "/results.jsonl", text)
    return text
  end

  it("is not a result record on --resume (malformed JSON), named by its " ..
    "line", function()
      local d = TMP .. "/torn-a"
      local text = mangle(d, run6(d), '{"episode": 2, garbage')
      local code, _, err = ludo("eval", ECHO, "--episodes", "6", "--seed",
        "5", "--max-steps", "3", "--out", d, "-q", "--resume")
      assert.are.equal(1, code, err)
      contains(err, d .. "/results.jsonl:3: not a result record " ..
        "(malformed JSON")
      lacks(err, "has seed")
      assert.are.equal(text, slurp(d .. "/results.jsonl"))
    end)

  it("is refused when cut after its seed, not taken for a record",
    function()
      local d = TMP .. "/torn-b"
      local recs = run6(d)
      local cut = recs[3]:match('^(.-"seed":%d+,"steps":%d+,)')
      assert.is_truthy(cut, recs[3])
      local text = mangle(d, recs, cut)
      local code, _, err = ludo("eval", ECHO, "--episodes", "6", "--seed",
        "5", "--max-steps", "3", "--out", d, "-q", "--resume")
      assert.are.equal(1, code, err)
      contains(err, d .. "/results.jsonl:3: not a result record " ..
        "(malformed JSON")
      assert.are.equal(text, slurp(d .. "/results.jsonl"))
    end)

  it("is said so by merge too", function()
    local d = TMP .. "/torn-c"
    mangle(d, run6(d), '{"episode": 2, garbage')
    local code, _, err = ludo("eval", "merge", d, "--out",
      TMP .. "/torn-c-all")
    assert.are.equal(1, code, err)
    contains(err, d .. "/results.jsonl:3: not a result record " ..
      "(malformed JSON")
  end)

  it("still resumes a folder whose lines are whole", function()
    local d = TMP .. "/whole"
    local recs = run6(d)
    -- the last 2 records gone (a crash): they run again
    spit(d .. "/results.jsonl", table.concat(recs, "\n", 1, 4) .. "\n")
    local code, _, err = ludo("eval", ECHO, "--episodes", "6", "--seed",
      "5", "--max-steps", "3", "--out", d, "-q", "--resume")
    assert.are.equal(0, code, err)
    assert.are.equal(6, #lines(slurp(d .. "/results.jsonl")))
  end)
end)

describe("the progress line after Ctrl-C", function()
  -- Runs a slow eval into `d` with `extra` flags, interrupts it once 6
  -- records are written; returns its exit status, last progress line and
  -- summary.json.
  local function interrupted(d, extra)
    local cmd = table.concat({
      quote(LUDO), "eval", quote(ECHO), "--policy", quote(SLOW),
      "--episodes 500 --max-steps 10 --concurrency 6", extra, "--out",
      quote(d), "2>" .. quote(d .. ".err"), "& P=$!;",
      "for i in $(seq 1200); do",
      "[ \"$(cat " .. quote(d .. "/results.jsonl") ..
        " 2>/dev/null | wc -l)\" -ge 6 ] && break; sleep 0.05; done;",
      "kill -INT $P; wait $P; echo $?" }, " ")
    local code, out, err = sh(cmd)
    assert.are.equal(0, code, err)
    local progress = lines(slurp(d .. ".err"))
    return tonumber(out:match("(%d+)")), progress[#progress],
      json.decode(slurp(d .. "/summary.json"))
  end

  local function check(status, last, s)
    assert.are.equal(130, status)
    local c = s.episodes.cancelled
    assert.is_true(c >= 1, last)
    local n = 0
    for _ in pairs(s.errors) do n = n + 1 end
    assert.are.equal(0, n, last) -- echo with this policy never fails
    -- "N/500 episodes ... errors 0  cancelled C": the cancelled apart,
    -- and not among the episodes done (--resume runs them again)
    local done, errors, cancelled = last:match(
      "^ludo eval: (%d+)/500 episodes .*  errors (%d+)  cancelled (%d+)$")
    assert.is_truthy(done, last)
    assert.are.equal(0, tonumber(errors), last)
    assert.are.equal(c, tonumber(cancelled), last)
    assert.are.equal(s.episodes.finished + s.episodes.failed,
      tonumber(done), last)
  end

  it("counts the cancelled episodes apart from the errors", function()
    check(interrupted(TMP .. "/sigint", ""))
  end)

  it("does so with worker processes too", function()
    check(interrupted(TMP .. "/sigint-w", "--workers 2"))
  end)

  it("says no cancelled episodes when there are none", function()
    local code, _, err = ludo("eval", ECHO, "--episodes", "3",
      "--max-steps", "2", "--out", TMP .. "/nocancel")
    assert.are.equal(0, code, err)
    assert.is_truthy(err:find("\nludo eval: 3/3 episodes .*  errors 0\n$")
      or err:find("^ludo eval: 3/3 episodes .*  errors 0\n$"), err)
    lacks(err, "cancelled")
  end)
end)

describe("a run file listing a task id twice", function()
  -- Writes a run file of `tasks` (Lua text) into TMP; returns its path.
  local function runfile(name, tasks)
    local path = TMP .. "/" .. name .. ".lua"
    spit(path, ("return { env = %q, policy = %q, tasks = %s, repeats = 2, " ..
      "pass_k = { 1, 2, 3, 4 }, seed = 3 }\n"):format(ARITH,
      ARITH .. "/policy.lua", tasks))
    return path
  end

  it("is refused, naming the id (a plain list of ids)", function()
    local out = TMP .. "/dup-a"
    local code, _, err = ludo("eval",
      runfile("dup_a", '{ "test-1", "test-1", "test-2" }'), "--out", out,
      "-q")
    assert.are.equal(1, code, err)
    contains(err, 'run file: tasks[2] is the task id "test-1" again ' ..
      "(tasks[1])")
    contains(err, "repeats")
    assert.is_false(exists(out .. "/results.jsonl"))
  end)

  it("is refused, naming the id (tasks.ids of a split)", function()
    local out = TMP .. "/dup-b"
    local code, _, err = ludo("eval", runfile("dup_b",
      '{ split = "test", ids = { "test-0", "test-2", "test-0" } }'),
      "--out", out, "-q")
    assert.are.equal(1, code, err)
    contains(err, 'run file: tasks.ids[3] is the task id "test-0" again ' ..
      "(tasks.ids[1])")
    assert.is_false(exists(out .. "/results.jsonl"))
  end)

  it("still runs a list of distinct ids", function()
    local out = TMP .. "/dup-none"
    local code, _, err = ludo("eval",
      runfile("dup_none", '{ "test-1", "test-2" }'), "--out", out, "-q")
    assert.are.equal(0, code, err)
    assert.are.equal(4, #lines(slurp(out .. "/results.jsonl")))
  end)
end)
