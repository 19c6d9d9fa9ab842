-- Functional specs of `ludo eval`'s run files and LLM policies (docs/eval.md)
-- through the binary: mistakes are one line naming what was wrong, with
-- the exit status of a run-file error (1), never a traceback of ludo's own
-- modules nor a field dropped without a word. The rest of `ludo eval`'s
-- tests: spec/eval/eval_test.py and eval_errors_spec.lua.
local cli = require("cliutil")
local ROOT = cli.ROOT
local ECHO = ROOT .. "/examples/echo"
local json = require("ludo.json")
local slurp, spit, exists = cli.slurp, cli.spit, cli.exists
local ludo, contains, lacks = cli.ludo, cli.contains, cli.lacks

local TMP
setup(function() TMP = cli.tmpdir("eval-runfile") end)
teardown(function() if TMP then cli.rmtmpdir(TMP) end end)

-- An LLM policy's table (Lua text) with `extra` fields and `llm` options;
-- the server is never reached by these specs (nothing listens on port 1).
local function llm_policy(extra, llm)
  return ("{ llm = { model = \"m\", base_url = \"http://127.0.0.1:1/v1\"%s" ..
    " }, prompt = function() return { { role = \"user\", content = \"q\" }" ..
    " } end, parse = function(t) return { text = t } end%s }"):format(
    llm or "", extra or "")
end

-- Writes the run file `name`.lua into TMP with `body` (the fields, Lua
-- text) and an env; runs it into a folder of its own. Returns the exit
-- status, stderr and the folder.
local function run(name, body)
  local path = TMP .. "/" .. name .. ".lua"
  spit(path, ("return { env = %q, %s }\n"):format(ECHO, body))
  local out = TMP .. "/" .. name .. "-out"
  local code, _, err = ludo("eval", path, "--out", out, "-q")
  return code, err, out
end

-- One line on stderr: no traceback.
local function one_line(err)
  assert.are.equal(1, select(2, err:gsub("\n", "")), err)
  lacks(err, "traceback")
  lacks(err, "lua/ludo/eval/")
end

describe("an LLM policy's table", function()
  it("refuses a field it does not have, naming it", function()
    local code, err = run("temperature", "episodes = 1, policy = " ..
      llm_policy(", temperature = 0.5"))
    assert.are.equal(1, code, err)
    contains(err, "policy.temperature is not a field of an LLM policy")
    contains(err, "go in policy.llm")
    one_line(err)
  end)

  it("names a misspelt field, not the one it misses", function()
    local code, err = run("pars", "episodes = 1, policy = { llm = { " ..
      "model = \"m\" }, prompt = function() end, pars = function() end }")
    assert.are.equal(1, code, err)
    contains(err, "policy.pars is not a field of an LLM policy (llm, " ..
      "parse, prompt")
    one_line(err)
  end)

  it("names the same unknown field in every run", function()
    local body = "episodes = 1, zeta = 1, alpha = 2, mid = 3, policy = " ..
      llm_policy(", b2 = 1, a1 = 2, c3 = 3")
    for i = 1, 4 do
      local code, err = run("order-" .. i, body)
      assert.are.equal(1, code, err)
      contains(err, "run file: alpha is not a field of a run file")
    end
    spit(TMP .. "/order-p.lua", ("return { env = %q, episodes = 1, " ..
      "policy = %s }\n"):format(ECHO, llm_policy(", b2 = 1, a1 = 2")))
    for _ = 1, 4 do
      local code, _, err = ludo("eval", TMP .. "/order-p.lua", "--out",
        TMP .. "/order-p-out", "-q")
      assert.are.equal(1, code, err)
      contains(err, "policy.a1 is not a field")
    end
  end)
end)

describe("an environment's module given as the run file", function()
  it("is said to be an environment, to pass its folder", function()
    local out = TMP .. "/envfile"
    local code, _, err = ludo("eval", ECHO .. "/env.lua", "--out", out, "-q")
    assert.are.equal(1, code, err)
    contains(err, "is an environment's module")
    contains(err, "pass its folder")
    lacks(err, "is not a field")
    assert.is_false(exists(out .. "/results.jsonl"))
  end)
end)

describe("an LLM policy's client options", function()
  it("that are wrong are one line naming policy.llm", function()
    local code, err = run("bogus", "episodes = 1, policy = " ..
      llm_policy(nil, ", bogus = 1"))
    assert.are.equal(1, code, err)
    contains(err, "policy.llm: ")
    contains(err, "bogus")
    one_line(err)
  end)

  it("naming a key variable that is not set are one line", function()
    local code, err = run("nokey", "episodes = 1, policy = " ..
      llm_policy(nil, ", api_key_env = \"LUDO_SPEC_NO_SUCH_VARIABLE\""))
    assert.are.equal(1, code, err)
    contains(err, "policy.llm: ")
    contains(err, "LUDO_SPEC_NO_SUCH_VARIABLE")
    one_line(err)
  end)
end)

describe("an LLM policy's prompt returning nil", function()
  it("fails the episode with an error naming prompt and what it returned",
    function()
      local code, err, out = run("prompt-nil", "episodes = 1, policy = " ..
        "{ llm = { model = \"m\", base_url = \"http://127.0.0.1:1/v1\" }, " ..
        "prompt = function() end, parse = function(t) return t end }")
      assert.are.equal(0, code, err)
      local rec = json.decode(slurp(out .. "/results.jsonl"))
      assert.are.equal("ESCRIPT", rec.error.class)
      contains(rec.error.message, "policy.prompt must return a list of " ..
        "messages")
      contains(rec.error.message, "it returned nil")
      lacks(rec.error.message, "chat")
      lacks(rec.error.message, "policy.lua")
    end)
end)

describe("a run file's workers out of range", function()
  it("is a run-file error (exit status 1), as the others are", function()
    local code, err = run("workers", "episodes = 1, workers = 300")
    assert.are.equal(1, code, err)
    contains(err, "workers must be 1 to 256 (got 300)")
  end)

  it("as is a run file naming no env", function()
    local path = TMP .. "/noenv.lua"
    spit(path, "return { episodes = 1 }\n")
    local code, _, err = ludo("eval", path, "--out", TMP .. "/noenv-out",
      "-q")
    assert.are.equal(1, code, err)
    contains(err, "names no env")
  end)
end)
