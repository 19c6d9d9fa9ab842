-- Specs for rubrics.llm_judge: prompt filling, score extraction (signed,
-- unlike OpenEnv), clients that answer directly or wait, state.
local LLMJudge = require("rubrics.llm_judge")
local async = require("ludo.async")
local null = require("ludo.null")
local util = require("testutil")

local function judge(text, opts)
  local o = { prompt_template = "A={action} O={observation}",
    client = util.client(text) }
  for k, v in pairs(opts or {}) do o[k] = v end
  return LLMJudge(o)
end

describe("rubrics.llm_judge", function()
  describe("prompt", function()
    it("fills action and observation; tables as sorted JSON", function()
      local c = util.client("1")
      local j = LLMJudge { prompt_template = "Act: {action}\nObs: "
        .. "{observation}\nAgain: {action}", client = c }
      j({ b = 1, a = { 1, 2 } }, "plain text")
      assert.are.equal('Act: {"a":[1,2],"b":1}\nObs: plain text\n'
        .. 'Again: {"a":[1,2],"b":1}', c.prompts[1])
    end)

    it("renders other values with tostring and null as JSON", function()
      assert.are.equal("A=42 O=nil",
        LLMJudge.format_prompt("A={action} O={observation}", 42, nil))
      assert.are.equal("A=true O=null",
        LLMJudge.format_prompt("A={action} O={observation}", true, null))
    end)

    it("reads {{ and }} as braces and leaves other fields alone",
      function()
        assert.are.equal('{"score": x} {other} {action',
          LLMJudge.format_prompt('{{"score": {action}}} {other} {action',
            "x", nil))
      end)

    it("follows a changed prompt_template", function()
      local c = util.client("1")
      local j = LLMJudge { prompt_template = "one {action}", client = c }
      j("a", nil)
      j.prompt_template = "two {action}"
      j("b", nil)
      assert.are.same({ "one a", "two b" }, c.prompts)
    end)

    it("passes client_opts to the client", function()
      local c = util.client("1")
      local opts = { temperature = 0 }
      LLMJudge { prompt_template = "x", client = c, client_opts = opts }()
      assert.are.equal(opts, c.opts[1])
    end)

    it("accepts a function as the client", function()
      local got
      local j = LLMJudge { prompt_template = "p {action}",
        client = function(prompt) got = prompt; return "0.25" end }
      assert.are.equal(0.25, j("q", nil))
      assert.are.equal("p q", got)
    end)

    it("accepts positional (template, client, options)", function()
      local j = LLMJudge("{action}", util.client("0.5"),
        { default_score = 0.1 })
      assert.are.equal(0.5, j("x", nil))
      assert.are.equal(0.1, j.default_score)
    end)
  end)

  describe("score extraction", function()
    local cases = {
      { "8/10", 1.0 },
      { "Score: 0.75", 0.75 },
      { "-0.5", 0.0 },
      { "Score: -0.5", 0.0 },
      { "1e-3", 0.001 },
      { "2.5E-1 points", 0.25 },
      { "no number", 0.0 },
      { "", 0.0 },
      { ".5", 0.5 },
      { "+0.3", 0.3 },
      { "v2 is 0.1", 1.0 },
      { "1e999", 1.0 },
    }
    for _, c in ipairs(cases) do
      it(("reads %q as %s"):format(c[1], c[2]), function()
        local v = judge(c[1])(nil, nil)
        assert.are.equal(c[2], v)
        assert.are.equal("float", math.type(v))
      end)
    end

    it("keeps the sign without normalize (OpenEnv drops it)", function()
      assert.are.equal(-0.5, judge("Score: -0.5", { normalize = false })())
      assert.are.equal(8.0, judge("8/10", { normalize = false })())
      assert.are.equal(0.001, judge("1e-3", { normalize = false })())
    end)

    it("falls back to default_score as given, even when normalizing "
      .. "(OpenEnv's _parse_score)", function()
      assert.are.equal(0.3, judge("none", { default_score = 0.3 })())
      assert.are.equal(7.0, judge("none", { default_score = 7 })())
      assert.are.equal(-1.0, judge("none", { default_score = -1 })())
      assert.are.equal(7.0, judge("none", { default_score = 7,
        normalize = false })())
    end)

    it("uses score_pattern: first capture, else the whole match",
      function()
        local p = { score_pattern = "rating (%d+)", normalize = false }
        assert.are.equal(9.0, judge("3 steps, rating 9", p)())
        assert.are.equal(0.0, judge("3 steps, no rating", p)())
        local whole = { score_pattern = "%d%.%d", normalize = false }
        assert.are.equal(4.5, judge("x 4.5 y", whole)())
        local bad = { score_pattern = "(%a+)" }
        assert.are.equal(0.0, judge("abc", bad)())
      end)

    it("rejects a malformed score_pattern", function()
      assert.has_error(function() judge("1", { score_pattern = "(%d" }) end,
        'LLMJudge: bad score_pattern "(%d": unfinished capture')
      assert.has_error(function() judge("1", { score_pattern = 5 }) end)
    end)

    it("validates Lua patterns as the matcher would", function()
      local good = { "(%d+)", "[%]]", "[]]", "[^]a]", "%b()", "%f[%w]%w+",
        "(a)%1", "%%", "a-b*c?", "()" }
      local bad = { "(", ")", "%", "[a", "[%", "%b(", "%fa", "%1", "(a%1)",
        "%f[a", "[^" }
      for _, p in ipairs(good) do
        assert.is_nil(LLMJudge.pattern_error(p), p)
        assert.has_no_error(function() ("x"):find(p) end)
      end
      for _, p in ipairs(bad) do
        assert.is_string(LLMJudge.pattern_error(p), p)
      end
    end)

    describe("score_regex", function()
      local saved_loaded, saved_preload
      before_each(function()
        saved_loaded = package.loaded["ludo.re"]
        saved_preload = package.preload["ludo.re"]
        package.loaded["ludo.re"] = nil
      end)
      after_each(function()
        package.loaded["ludo.re"] = saved_loaded
        package.preload["ludo.re"] = saved_preload
      end)

      it("raises a clear error when ludo.re is missing", function()
        package.preload["ludo.re"] = function()
          error("no ludo.re in this test", 0)
        end
        local ok, err = pcall(judge, "1", { score_regex = "(\\d+)" })
        assert.is_false(ok)
        assert.matches("score_regex needs the ludo.re module", err)
        assert.matches("use score_pattern", err)
      end)

      it("uses ludo.re.find when it is there", function()
        local calls = {}
        package.preload["ludo.re"] = function()
          return {
            find = function(s, p)
              calls[#calls + 1] = p
              if p == "(" then return nil, "EREGEX: missing )" end
              return s:find("(%d+)/10")
            end,
          }
        end
        local j = judge("got 7/10", { score_regex = "(\\d+)/10",
          normalize = false })
        assert.are.equal(7.0, j())
        assert.are.equal("(\\d+)/10", calls[#calls])
        assert.are.equal("(\\d+)/10", j:state_dict().score_regex)
        assert.has_error(function() judge("1", { score_regex = "(" }) end,
          'LLMJudge: bad score_regex "(": EREGEX: missing )')
      end)

      it("refuses score_pattern and score_regex together", function()
        assert.has_error(function()
          judge("1", { score_pattern = "x", score_regex = "x" })
        end, "LLMJudge: give score_pattern or score_regex, not both")
      end)
    end)
  end)

  describe("client", function()
    it("raises when the client fails with nil, err", function()
      local j = LLMJudge { prompt_template = "x",
        client = function() return nil, "ETIMEDOUT: no answer" end }
      local ok, err = pcall(j)
      assert.is_false(ok)
      assert.matches("LLMJudge: the client failed: ETIMEDOUT: no answer",
        err)
      -- the rubric's path names it; no position inside the library
      assert.is_nil(err:find("rubric.lua:", 1, true))
      assert.is_nil(err:find("llm_judge.lua:", 1, true))
    end)

    it("raises when the client returns a non-string", function()
      local j = LLMJudge { prompt_template = "x",
        client = function() return 0.5 end }
      local ok, err = pcall(j)
      assert.is_false(ok)
      assert.matches("the client must return a string, got number", err)
    end)

    it("waits for a client that awaits, and returns a number", function()
      local j = LLMJudge { prompt_template = "{action}",
        client = util.client("Score: 0.6", 2) }
      local now, v = util.run_timed(function() return j("a", nil) end)
      assert.are.equal(2, now)
      assert.are.equal(0.6, v)
      assert.are.equal("number", type(v))
      assert.are.equal(0.6, j.last_score)
    end)

    it("cannot wait outside a driver", function()
      local j = LLMJudge { prompt_template = "x",
        client = util.client("1", 1) }
      local ok, err = pcall(j)
      assert.is_false(ok)
      assert.matches("not inside a ludo call", err)
    end)

    it("is async-marked", function()
      assert.is_true(LLMJudge.async)
      assert.is_true(judge("1"):is_async())
      assert.is_false(async.can_wait())
    end)
  end)

  describe("construction", function()
    it("checks its options", function()
      local c = util.client("1")
      assert.has_error(function() LLMJudge { client = c } end,
        "LLMJudge: prompt_template must be a string, got nil")
      assert.has_error(function() LLMJudge { prompt_template = "x" } end)
      assert.has_error(function()
        LLMJudge { prompt_template = "x", client = {} }
      end)
      assert.has_error(function()
        LLMJudge { prompt_template = "x", client = c, temp = 1 }
      end, 'LLMJudge: unknown option "temp"')
      assert.has_error(function()
        LLMJudge { prompt_template = "x", client = c, normalize = 1 }
      end, "LLMJudge: normalize must be a boolean, got number")
      assert.has_error(function()
        LLMJudge { prompt_template = "x", client = c, default_score = "0" }
      end, "LLMJudge: default_score must be a number, got string")
    end)

    it("checks llm (a ludo.llm client's options; spec/llm runs it)",
      function()
        local c = util.client("1")
        assert.has_error(function()
          LLMJudge { prompt_template = "x", client = c, llm = {} }
        end, "LLMJudge: give client or llm, not both")
        assert.has_error(function()
          LLMJudge { prompt_template = "x", llm = "gpt" }
        end, "LLMJudge: llm must be a table of ludo.llm.client options, "
          .. "got string")
      end)
  end)

  describe("state", function()
    it("saves the template, patterns, default and normalize", function()
      local j = judge("1", { score_pattern = "(%d+)", default_score = 0.2,
        normalize = false })
      assert.are.same({ prompt_template = "A={action} O={observation}",
        score_pattern = "(%d+)", score_regex = null, default_score = 0.2,
        normalize = false }, j:state_dict())
      assert.are.equal(null, judge("1"):state_dict().score_pattern)
    end)

    it("loads partially and clears patterns with ludo.null", function()
      local j = judge("rating 9 of 10", { score_pattern = "of (%d+)",
        normalize = false })
      assert.are.equal(10.0, j())
      j:load_state_dict({ default_score = 0.5 })
      assert.are.equal(10.0, j())
      assert.are.equal(0.5, j.default_score)
      j:load_state_dict({ score_pattern = null })
      assert.are.equal(9.0, j())
      j:load_state_dict({ normalize = true, prompt_template = "{action}" })
      assert.are.equal(1.0, j())
      assert.has_error(function()
        j:load_state_dict({ normalize = "yes" })
      end)
    end)
  end)
end)
