-- Functional specs for the environment API as a session sees it
-- (lua/ludo/runner.lua, lua/ludo/envinfo.lua, lua/ludo/schema.lua and the
-- C action validator), driven through ludo.host with the fixtures under
-- spec/fixtures/functional/: declaration errors at load, action validation,
-- rubric and transform application, reset/state semantics, seeds, the info
-- JSON and module resolution.
local host = require("ludo.host")
local json = require("ludo.json")

local FIX = "spec/fixtures/functional/"

local UUID = "^%x%x%x%x%x%x%x%x%-%x%x%x%x%-4%x%x%x%-[89ab]%x%x%x%-"
  .. "%x%x%x%x%x%x%x%x%x%x%x%x$"

local function decoded(text, err)
  assert.is_string(text, err)
  return json.decode(text)
end

describe("environment API", function()
  local rt

  before_each(function()
    rt = assert(host.runtime({ module_path = ".", prewarm = 0 }))
  end)

  after_each(function()
    rt:close()
  end)

  describe("declaration errors fail rt:load", function()
    -- fixture, code, text the message must contain (plain)
    local cases = {
      { "decl_no_step", "ELOAD",
        "ELOAD: the environment module has no step(action) function" },
      { "decl_bad_type", "ELOAD",
        "ELOAD: schema: action.message: unknown type 'strng'" },
      { "decl_not_table", "ELOAD",
        "ELOAD: the environment module must return a table, got number" },
      { "decl_bad_reset", "ELOAD",
        "ELOAD: reset must be a function, got number" },
      { "decl_bad_rubric", "ELOAD",
        "ELOAD: rubric must be a rubric object or a function, got string" },
      { "decl_rubric_total", "ELOAD",
        "ELOAD: rubric: a child rubric may not be named 'total'" },
      { "syntax_error", "ELOAD",
        "ELOAD: " .. FIX .. "syntax_error/env.lua:3: unexpected symbol "
          .. "near '='" },
      { "helper_syntax", "ELOAD",
        "ELOAD: " .. FIX .. "helper_syntax/broken.lua:2: unexpected "
          .. "symbol near <eof>" },
      { "missing_helper", "ELOAD", "module 'nothere' not found" },
      { "decl_tool_reserved", "ELOAD",
        "ELOAD: tools: the name 'reset' is reserved" },
      { "decl_tool_run", "ELOAD",
        "ELOAD: tools.greet.run must be a function, got nil" },
      { "decl_tool_name", "ELOAD",
        "ELOAD: tools: a tool name must be 1-128 letters" },
      { "decl_tool_input", "ELOAD",
        "ELOAD: tools.t.input must describe an object" },
      { "decl_tool_twice", "ELOAD", "ELOAD: tools: 't' is declared twice" },
      { "decl_tasks_type", "ELOAD",
        "ELOAD: tasks must be a table, got string" },
      { "decl_tasks_field", "ELOAD",
        "ELOAD: tasks.size: unknown field (the fields are splits, list, "
          .. "count, get and range)" },
      { "decl_tasks_splits", "ELOAD",
        "ELOAD: tasks.splits must be a list of split names or a function, "
          .. "got nil" },
      { "decl_tasks_split_entry", "ELOAD",
        "ELOAD: tasks.splits[2] must be a split name or a table with a name, "
          .. "got number" },
      { "decl_tasks_split_twice", "ELOAD",
        "ELOAD: tasks.splits: 'train' is listed twice" },
      { "decl_tasks_func", "ELOAD",
        "ELOAD: tasks.count must be a function, got number" },
      { "decl_tasks_lookup", "ELOAD",
        "ELOAD: tasks needs get(split, index) or list(split)" },
      { "nonexistent", "ENOENT",
        "ENOENT: no environment at " .. FIX .. "nonexistent" },
    }
    for _, c in ipairs(cases) do
      it(c[1], function()
        local env, msg, code = rt:load(FIX .. c[1])
        assert.is_nil(env)
        assert.are.equal(c[2], code, msg)
        assert.is_truthy(msg:find(c[3], 1, true),
          "message '" .. msg .. "' lacks '" .. c[3] .. "'")
        -- A malformed declaration is told in one line: no traceback
        -- through ludo's own checks (ludo.envinfo, ludo.runner).
        if c[1]:find("^decl_") then
          assert.is_nil(msg:find("traceback", 1, true), msg)
        end
        -- The runtime is still usable.
        assert.is_truthy(rt:load(FIX .. "validate"))
      end)
    end
  end)

  describe("declared schemas and metadata within the load's limits", function()
    -- Compiled in C (schemas) or kept by the runtime (the description), so
    -- bounded explicitly: a chain of $refs crashed the process, and a big
    -- schema or readme held host memory past the state's cap.
    local cases = {
      { "decl_schema_chain", "ELOAD",
        "action schema: EPARSE: schema: /$defs/d512: subschemas nest more "
          .. "than 512 deep" },
      { "decl_tool_chain", "ELOAD", "tools.t.input: EPARSE: schema: " },
      { "decl_schema_big", "ENOMEM",
        "schema: its tree would hold more than 8 MiB (the memory cap)" },
      { "decl_readme_big", "ENOMEM", "reached the memory limit during load" },
      { "decl_tool_big", "ENOMEM", "reached the memory limit during load" },
    }
    for _, c in ipairs(cases) do
      it(c[1], function()
        local small = assert(host.runtime({ module_path = ".", prewarm = 0,
          memory_cap = 8 << 20 }))
        local env, msg, code = small:load(FIX .. c[1])
        assert.is_nil(env)
        assert.are.equal(c[2], code, msg)
        assert.is_truthy(msg:find(c[3], 1, true), msg)
        assert.is_truthy(small:load(FIX .. "validate"))
        small:close()
      end)
    end
  end)

  describe("action validation", function()
    local s
    local good = {
      name = "a", count = 1, mode = "fast", tags = json.array({ "x" }),
      pos = { x = 1, y = 2.5 }, level = 3,
    }

    -- A copy of the good action with `changes` applied (json.null removes).
    local function with(changes, nested)
      local a = {}
      for k, v in pairs(good) do a[k] = v end
      for k, v in pairs(changes) do
        if v == json.null then a[k] = nil else a[k] = v end
      end
      for k, v in pairs(nested or {}) do a[k] = v end
      return json.encode(a)
    end

    before_each(function()
      local env = assert(rt:load(FIX .. "validate"))
      s = assert(env:open())
      assert(s:reset())
    end)

    it("accepts a valid action and passes it to step", function()
      local out = decoded(s:step(json.encode(good)))
      assert.are.same({ echoed = "a", level = 3, note = "(nil)",
        z = "(nil)" }, out.observation)
    end)

    it("accepts OpenEnv's action metadata (an object) and passes it on",
      function()
        local out = decoded(s:step(with({ metadata = { source = "client" } })))
        assert.are.equal("a", out.observation.echoed)
        local bad, msg = s:step(with({ metadata = 3 }))
        assert.is_nil(bad)
        assert.are.equal("ESCHEMA: action.metadata: expected object, got "
          .. "integer", msg)
      end)

    it("accepts optional fields and an integer for a number", function()
      local out = decoded(s:step(with({ note = "n", ratio = 2 })))
      assert.are.equal("a", out.observation.echoed)
      assert.are.equal("n", out.observation.note)
    end)

    it("takes null for an optional field, which step sees as nil (typed "
      .. "clients send an unset Optional field as null)", function()
        local base = '{"name":"a","count":1,"mode":"fast","tags":["x"],'
          .. '"level":3,'
        local out = decoded(s:step(base .. '"pos":{"x":1,"y":2,"z":null},'
          .. '"note":null,"ratio":null}'))
        assert.are.equal("(nil)", out.observation.note)
        assert.are.equal("(nil)", out.observation.z)
        out = decoded(s:step(base .. '"pos":{"x":1,"y":2,"z":7}}'))
        assert.are.equal("(nil)", out.observation.note)
        assert.are.equal(7, out.observation.z)
        -- a required field still refuses null, and an optional one any
        -- other type
        local bad, msg = s:step(base .. '"pos":{"x":null,"y":2}}')
        assert.is_nil(bad)
        assert.are.equal("ESCHEMA: action.pos.x: expected number, got null",
          msg)
        bad, msg = s:step(base .. '"pos":{"x":1,"y":2},"note":5}')
        assert.is_nil(bad)
        assert.is_truthy(msg:find("^ESCHEMA: action.note: expected "), msg)
      end)

    -- name, action text, the whole ESCHEMA message
    local bad = {
      { "wrong type", with({ count = "1" }),
        "ESCHEMA: action.count: expected integer, got string" },
      { "float for an integer", with({ count = 1.5 }),
        "ESCHEMA: action.count: expected integer, got number" },
      { "missing required field", with({ name = json.null }),
        "ESCHEMA: action: missing required field 'name'" },
      { "unknown field", with({ extra = 1 }),
        "ESCHEMA: action: unknown field 'extra'" },
      { "enum violation", with({ mode = "medium" }),
        'ESCHEMA: action.mode: expected one of ["fast","slow"]' },
      { "array item of the wrong type",
        with({ tags = json.array({ "x", 2 }) }),
        "ESCHEMA: action.tags[1]: expected string, got integer" },
      { "nested field of the wrong type", with({}, { pos = { x = "1",
        y = 2 } }), "ESCHEMA: action.pos.x: expected number, got string" },
      { "nested required field missing", with({}, { pos = { x = 1 } }),
        "ESCHEMA: action.pos: missing required field 'y'" },
      { "nested unknown field", with({}, { pos = { x = 1, y = 2, w = 3 } }),
        "ESCHEMA: action.pos: unknown field 'w'" },
      { "array for an object", with({ pos = json.array() }),
        "ESCHEMA: action.pos: expected object, got array" },
      { "above maximum (JSON Schema field)", with({ level = 9 }),
        "ESCHEMA: action.level: must be <= 5, got 9" },
      { "below minimum (JSON Schema field)", with({ level = 0 }),
        "ESCHEMA: action.level: must be >= 1, got 0" },
      { "an array instead of an object", "[1]",
        "ESCHEMA: action: expected object, got array" },
      { "null instead of an object", "null",
        "ESCHEMA: action: expected object, got null" },
      { "a string instead of an object", '"x"',
        "ESCHEMA: action: expected object, got string" },
    }
    for _, c in ipairs(bad) do
      it("names the field: " .. c[1], function()
        local out, msg, code = s:step(c[2])
        assert.is_nil(out)
        assert.are.equal("ESCHEMA", code)
        assert.are.equal(c[3], msg)
        -- A refused action is not a step.
        assert.are.equal(0, decoded(s:state()).step_count)
      end)
    end

    it("malformed JSON is EPARSE with a position", function()
      local out, msg, code = s:step("{bad json")
      assert.is_nil(out)
      assert.are.equal("EPARSE", code)
      assert.is_truthy(msg:find("at line 1 column %d+ %(byte %d+%)$"), msg)
    end)
  end)

  describe("rubrics and transforms", function()
    local s

    before_each(function()
      local env = assert(rt:load(FIX .. "api"))
      s = assert(env:open())
      assert(s:reset())
    end)

    it("the rubric's score is the reward when step sets none", function()
      local out = decoded(s:step('{"mode":"plain"}'))
      assert.are.equal(0.5, out.reward)
      assert.are.equal(42, out.observation.value)
    end)

    it("metadata.rubrics has the total and every named child", function()
      local out = decoded(s:step('{"mode":"plain"}'))
      assert.are.same({ total = 0.5, bonus = 0.5, counter = 1 },
        out.metadata.rubrics)
    end)

    it("the step's own reward is kept; the rubric still reports",
      function()
        local out = decoded(s:step('{"mode":"own_reward"}'))
        assert.are.equal(0.25, out.reward)
        assert.are.same({ total = 0.5, bonus = 0.5, counter = 1 },
          out.metadata.rubrics)
        assert.is_nil(out.observation.reward)
      end)

    it("the transform runs before the rubric and shows in the observation",
      function()
        -- Bonus scores obs.bonus, or -1 when the transform did not run.
        local out = decoded(s:step('{"mode":"plain"}'))
        assert.are.equal(0.5, out.observation.bonus)
        assert.are.equal(0.5, out.metadata.rubrics.bonus)
      end)

    it("the transform applies to reset observations too", function()
      local out = decoded(s:reset())
      assert.are.same({ bonus = 0.5, greeting = "hello from helper" },
        out.observation)
      assert.are.equal(json.null, out.reward)
      assert.is_false(out.done)
      assert.is_nil(out.metadata)
    end)

    it("done from the step reaches the envelope", function()
      local out = decoded(s:step('{"mode":"done"}'))
      assert.is_true(out.done)
      assert.is_nil(out.observation.done)
    end)

    it("env reset resets the rubric tree (a step counter returns to 0)",
      function()
        for i = 1, 3 do
          local out = decoded(s:step('{"mode":"plain"}'))
          assert.are.equal(i, out.metadata.rubrics.counter)
        end
        assert.are.equal(3, decoded(s:state()).counter)
        assert(s:reset())
        assert.are.equal(0, decoded(s:state()).counter)
        local out = decoded(s:step('{"mode":"plain"}'))
        assert.are.equal(1, out.metadata.rubrics.counter)
      end)
  end)

  describe("rubric names and errors", function()
    local ENV = FIX .. "rubric_names/env.lua"
    local s

    -- The line of the function definition `pattern` in the fixture.
    local function line_of(pattern)
      local n = 0
      for l in io.lines(ENV) do
        n = n + 1
        if l:find(pattern, 1, true) then return n end
      end
      error("no " .. pattern .. " in " .. ENV)
    end

    local function step(mode)
      return s:step(json.encode({ mode = mode }))
    end

    before_each(function()
      local env = assert(rt:load(FIX .. "rubric_names"))
      s = assert(env:open())
      assert(s:reset())
    end)

    it("reports every score under its path, in tree order", function()
      local text = assert(step("ok"))
      local out = json.decode(text)
      assert.are.same({ total = 0.875, answer = 0.875, ["answer.gate"] = 1.0,
        ["answer.gate.correct"] = 1.0, ["answer.style"] = 0.5 },
        out.metadata.rubrics)
      assert.are.equal(0.875, out.reward)
      assert.is_truthy(text:find('"rubrics":{"total":0.875,"answer":0.875,'
        .. '"answer.gate":1.0,"answer.gate.correct":1.0,'
        .. '"answer.style":0.5}', 1, true), text)
    end)

    it("a NaN score fails the step naming the rubric that gave it, not "
      .. "the root its NaN reached", function()
        local out, msg, code = step("nan")
        assert.is_nil(out)
        assert.are.equal("ESCRIPT", code)
        assert.are.equal("ESCRIPT: the score of rubric answer.style must be "
          .. "a finite number or nil, got nan", msg)
      end)

    it("a forward returning a string fails the step, naming the rubric, "
      .. "the type and the forward's line", function()
        local out, msg, code = step("string")
        assert.is_nil(out)
        assert.are.equal("ESCRIPT", code)
        assert.are.equal("ESCRIPT: rubric answer.gate.correct (Correct): "
          .. "forward (defined at " .. ENV .. ":"
          .. line_of("function Correct.forward") .. ') returned a string '
          .. '("yes"); a rubric must return a number, or nil for no score',
          msg:match("^[^\n]*"))
      end)

    it("a forward's score is checked by type in a session: numbers of "
      .. "either subtype pass, anything else fails naming the rubric",
      function()
        for _, case in ipairs({ { "boolean", "boolean (true);" },
          { "table", "table;" } }) do
          local out, msg, code = step(case[1])
          assert.is_nil(out)
          assert.are.equal("ESCRIPT", code)
          assert.is_truthy(msg:find("rubric answer.gate.correct (Correct): "
            .. "forward (defined at ", 1, true), msg)
          assert.is_truthy(msg:find(") returned a " .. case[2], 1, true),
            msg)
        end
        local out = decoded(step("integer"))
        assert.are.equal(1, out.metadata.rubrics["answer.gate.correct"])
        assert.are.equal(0.875, out.reward)
      end)

    it("a child giving no score fails the Gate, naming the Gate",
      function()
        local out, msg, code = step("none")
        assert.is_nil(out)
        assert.are.equal("ESCRIPT", code)
        assert.are.equal("ESCRIPT: rubric answer.gate (Gate): child correct "
          .. "gave no score (nil); a Gate compares its child's score with "
          .. "its threshold", msg:match("^[^\n]*"))
      end)

    it("an error inside a forward names the rubric and keeps its place",
      function()
        local out, msg, code = step("boom")
        assert.is_nil(out)
        assert.are.equal("ESCRIPT", code)
        local want = "ESCRIPT: rubric answer.style (Style): " .. ENV .. ":"
          .. (line_of("function Style.forward") + 3)
          .. ": attempt to index a nil value (local 't')"
        assert.are.equal(want, msg:sub(1, #want))
        -- The session goes on.
        assert.are.equal(0.875, decoded(step("ok")).reward)
      end)

    it("errors still name the rubric after a step stopped while it waited",
      function()
        local wrt = assert(host.runtime({ module_path = ".", prewarm = 0,
          wall_limit_ms = 100 }))
        local ws = assert(assert(wrt:load(FIX .. "rubric_names")):open())
        assert(ws:reset())
        local out, msg, code = ws:step(json.encode({ mode = "wait" }))
        assert.is_nil(out)
        assert.are.equal("ETIMEOUT", code, msg)
        out, msg = ws:step(json.encode({ mode = "boom" }))
        assert.is_nil(out)
        assert.is_truthy(msg:find("ESCRIPT: rubric answer.style (Style): ",
          1, true), msg)
        assert.are.equal(0.875,
          decoded(ws:step(json.encode({ mode = "ok" }))).reward)
        wrt:close()
      end)
  end)

  describe("reset and state", function()
    local env

    before_each(function()
      env = assert(rt:load(FIX .. "api"))
    end)

    it("reset zeroes step_count and takes episode_id from the options",
      function()
        local s = assert(env:open())
        assert(s:reset('{"episode_id":"ep-1"}'))
        assert(s:step('{"mode":"plain"}'))
        assert(s:step('{"mode":"plain"}'))
        local st = decoded(s:state())
        assert.are.equal(2, st.step_count)
        assert.are.equal("ep-1", st.episode_id)
        assert(s:reset('{"episode_id":"ep-2"}'))
        st = decoded(s:state())
        assert.are.equal(0, st.step_count)
        assert.are.equal("ep-2", st.episode_id)
        s:close()
      end)

    it("a reset that raises leaves no episode until one succeeds",
      function()
        local s = assert(env:open())
        assert(s:reset('{"episode_id":"ep-1"}'))
        assert(s:step('{"mode":"plain"}'))
        local out, msg, code = s:reset('{"episode_id":"ep-2","fail":true}')
        assert.is_nil(out)
        assert.are.equal("ESCRIPT", code, msg)
        assert.is_truthy(msg:find("this reset fails", 1, true), msg)
        local st = decoded(s:state())
        assert.are.equal(0, st.step_count)
        assert.are.equal(json.null, st.episode_id)
        assert(s:reset('{"episode_id":"ep-3"}'))
        assert.are.equal("ep-3", decoded(s:state()).episode_id)
        s:close()
      end)

    it("reset without an episode_id makes a fresh UUID each time",
      function()
        local s = assert(env:open())
        assert(s:reset())
        local a = decoded(s:state()).episode_id
        assert(s:reset("{}"))
        local b = decoded(s:state()).episode_id
        assert.is_truthy(a:find(UUID), a)
        assert.is_truthy(b:find(UUID), b)
        assert.are_not.equal(a, b)
        s:close()
      end)

    it("state() completes the env's state with episode_id and step_count",
      function()
        local s = assert(env:open())
        assert(s:reset('{"episode_id":"ep-s"}'))
        assert(s:step('{"mode":"plain"}'))
        assert.are.same({ custom = "yes", counter = 1, episode_id = "ep-s",
          step_count = 1 }, decoded(s:state()))
        s:close()
      end)

    it("state() keeps OpenEnv's State types for episode_id and step_count",
      function()
        local s = assert(assert(rt:load(FIX .. "badstate")):open())
        assert(s:reset('{"episode_id":"e"}'))
        for _, c in ipairs({
          { { step_count = "many" }, "step_count must be an integer >= 0 "
            .. "or nil (the runtime's), got string" },
          { { step_count = -1 }, "got -1" },
          -- the runtime's fields would mix with the items: named as such
          { { 1, 2, 3 }, "state of environment badstate must return a "
            .. "table of named fields (an object), got an array" },
          { { step_count = 1.5 }, "got float" },
          { { episode_id = 5 }, "episode_id must be a string or nil "
            .. "(the runtime's), got number" },
        }) do
          assert(s:step(json.encode({ state = c[1] })))
          local out, msg, code = s:state()
          assert.is_nil(out)
          assert.are.equal("ESCRIPT", code)
          assert.is_truthy(msg:find(c[2], 1, true), msg)
        end
        -- its own values of the right types are its business
        assert(s:step(json.encode({ state = { step_count = 40,
          episode_id = "mine" } })))
        assert.are.same({ step_count = 40, episode_id = "mine" },
          decoded(s:state()))
        s:close()
      end)

    it("refuses bad reset options with ESCHEMA", function()
      local s = assert(env:open())
      local cases = {
        { '{"seed":1.5}',
          "ESCHEMA: reset.seed: expected integer or null, got number" },
        { '{"seed":"x"}',
          "ESCHEMA: reset.seed: expected integer or null, got string" },
        -- integral, but past what a Lua integer holds (math.randomseed
        -- raised inside ludo's runner)
        { '{"seed":1e300}',
          "ESCHEMA: reset.seed: expected integer or null, got number" },
        { '{"seed":9.3e18}',
          "ESCHEMA: reset.seed: expected integer or null, got number" },
        { '{"episode_id":3}',
          "ESCHEMA: reset.episode_id: expected string or null, got integer" },
        -- OpenEnv's ResetRequest ranges, on every transport
        { '{"seed":-1}', "ESCHEMA: reset.seed: must be >= 0, got -1" },
        -- the value as sent, not rounded to six digits
        { '{"seed":-9223372036854775808}', "ESCHEMA: reset.seed: must be "
          .. ">= 0, got -9223372036854775808" },
        { '{"episode_id":"' .. ("\u{e9}"):rep(256) .. '"}',
          "ESCHEMA: reset.episode_id: length must be <= 255, got 256" },
        { '"x"', "ESCHEMA: reset: expected object, got string" },
      }
      for _, c in ipairs(cases) do
        local out, msg, code = s:reset(c[1])
        assert.is_nil(out)
        assert.are.equal("ESCHEMA", code)
        assert.are.equal(c[2], msg)
      end
      -- 255 characters (510 bytes) are within the limit
      assert(s:reset('{"seed":0,"episode_id":"' .. ("\u{e9}"):rep(255)
        .. '"}'))
      assert(s:reset())
      s:close()
    end)

    it("refuses a JSON array as reset options", function()
        local s = assert(env:open())
        local out, msg, code = s:reset("[1]")
        assert.is_nil(out)
        assert.are.equal("ESCHEMA", code)
        assert.are.equal("ESCHEMA: reset: expected object, got array", msg)
        s:close()
      end)

    -- The observations of reset(seed) and five random steps, as JSON.
    local function trajectory(s, seed)
      local t = { (assert(s:reset(json.encode({ seed = seed })))) }
      for _ = 1, 5 do
        t[#t + 1] = json.encode(decoded(s:step('{"mode":"random"}'))
          .observation)
      end
      return t
    end

    it("the same seed gives identical trajectories, across sessions",
      function()
        local a, b = assert(env:open()), assert(env:open())
        local ta = trajectory(a, 1234)
        local tb = trajectory(b, 1234)
        assert.are.same(ta, tb)
        -- And again on the same session after other draws.
        assert.are.same(ta, trajectory(a, 1234))
        a:close()
        b:close()
      end)

    it("different seeds give different trajectories", function()
      local s = assert(env:open())
      local t1 = trajectory(s, 1)
      local t2 = trajectory(s, 2)
      assert.are_not.same(t1, t2)
      -- Each random step differs, not just one.
      for i = 2, #t1 do assert.are_not.equal(t1[i], t2[i]) end
      s:close()
    end)
  end)

  describe("info", function()
    it("has the declared metadata and expanded schemas", function()
      local env = assert(rt:load(FIX .. "api"))
      local info = decoded(env:info())
      assert.are.equal("api_env", info.name)
      assert.are.equal("Exercises the environment API.", info.description)
      assert.are.equal("2.3.4", info.version)
      assert.is_true(info.concurrent)
      -- OpenEnv's Action and Observation fields are added to the declared
      -- objects: typed OpenEnv clients send "metadata" with every action.
      local metadata = { type = "object", additionalProperties = true,
        description = "Additional metadata" }
      assert.are.same({
        type = "object", additionalProperties = false,
        properties = { mode = { enum = { "plain", "own_reward", "random",
          "done" } }, metadata = metadata },
        required = { "mode" },
      }, info.action)
      assert.are.same({
        type = "object", additionalProperties = false,
        properties = { value = { type = { "integer", "null" } },
          r = { type = { "integer", "null" } },
          f = { type = { "number", "null" } },
          bonus = { type = { "number", "null" } },
          greeting = { type = { "string", "null" } }, metadata = metadata,
          done = { type = "boolean",
            description = "Whether the episode has ended" },
          reward = { type = { "number", "null" },
            description = "The reward of the last call" } },
      }, info.observation)
      assert.are.same({ "counter", "custom", "episode_id", "step_count" },
        info.state.required)
    end)

    it("expands the compact form (optional, arrays, enums, nesting, "
      .. "JSON Schema fields) and fills defaults", function()
        local env = assert(rt:load(FIX .. "validate"))
        local info = decoded(env:info())
        assert.are.equal("validate", info.name)
        assert.are.equal("validate environment", info.description)
        assert.are.equal("1.0.0", info.version)
        assert.are.equal(json.null, info.author)
        assert.are.same({ type = "object" }, info.observation)
        assert.are.same({ type = "object" }, info.state)
        assert.are.same({
          type = "object", additionalProperties = false,
          properties = {
            name = { type = "string" },
            count = { type = "integer" },
            ratio = { type = { "number", "null" } },
            mode = { enum = { "fast", "slow" } },
            tags = { type = "array", items = { type = "string" } },
            pos = { type = "object", additionalProperties = false,
              properties = { x = { type = "number" }, y = { type = "number" },
                z = { type = { "number", "null" } } },
              required = { "x", "y" } },
            level = { type = "integer", minimum = 1, maximum = 5 },
            note = { type = { "string", "null" } },
            metadata = { type = "object", additionalProperties = true,
              description = "Additional metadata" },
          },
          required = { "count", "level", "mode", "name", "pos", "tags" },
        }, info.action)
      end)

    it("is canonical JSON (keys sorted)", function()
      local env = assert(rt:load(FIX .. "validate"))
      local text = env:info()
      assert.are.equal(text, json.encode(json.decode(text)))
    end)
  end)

  describe("modules", function()
    it("require() finds a helper in the environment's own folder",
      function()
        local env = assert(rt:load(FIX .. "api"))
        local s = assert(env:open())
        local out = decoded(s:reset())
        assert.are.equal("hello from helper", out.observation.greeting)
        assert.are.equal(42, decoded(s:step('{"mode":"plain"}'))
          .observation.value)
        s:close()
      end)
  end)
end)

describe("the C modules under test", function()
  it("come from the build the suite was started for", function()
    local build = os.getenv("LUDO_BUILD") or "build"
    local path = package.searchpath("ludo.host", package.cpath)
    assert.is_truthy(path and path:find(build .. "/cmod/", 1, true), path)
  end)
end)

describe("trajectory rubrics at the end of an episode", function()
  it("report each trajectory rubric's discounted step rewards", function()
    local rt = assert(host.runtime({ module_path = ".", prewarm = 0 }))
    local env = assert(rt:load(FIX .. "discounted"))
    local s = assert(env:open())
    assert(s:reset("{}"))
    local r1 = json.decode(assert(s:step("{}")))
    assert.is_nil((r1.metadata or {}).step_rewards)
    json.decode(assert(s:step("{}")))
    local r3 = json.decode(assert(s:step("{}")))
    assert.is_true(r3.done)
    assert.are.same({ 0.25, 0.5, 1.0 }, r3.metadata.step_rewards.win)
    -- the root is a WeightedSum, not a trajectory rubric
    assert.is_nil(r3.metadata.step_rewards.total)
    rt:close()
  end)
end)
