-- Functional specs for the action schema's keywords (runtime/script/
-- schema.c, docs/environments.md "Schemas"): what each one accepts and
-- rejects, and the schemas that must not load, because a keyword has a
-- malformed value or asserts something the checker does not implement
-- (a schema never fails open). Sessions through ludo.host.
local host = require("ludo.host")

local FIX = "spec/fixtures/functional/"

describe("action schema keywords", function()
  local rt

  before_each(function()
    rt = assert(host.runtime({ module_path = ".", prewarm = 0 }))
  end)

  after_each(function()
    rt:close()
  end)

  -- Each case: an action, and nil when it passes or the ESCHEMA message.
  local cases = {
    { '{"short":"12345678"}', nil },
    { '{"short":"123456789"}', "action.short: length must be <= 8, got 9" },
    { '{"word":"abc"}', nil },
    { '{"word":"ab1"}', "action.word: does not match the pattern" },
    { '{"point":{"x":1.5}}', nil },
    { '{"point":{"x":0.3}}', "action.point.x: must be a multiple of 0.5, "
      .. "got 0.3" },
    { '{"point":{}}', "action.point: missing required field 'x'" },
    { '{"point":[]}', "action.point: expected object, got array" },
    { '{"tree":{"name":"a","child":{"name":"b","child":{"name":"c"}}}}',
      nil },
    { '{"tree":{"name":"a","child":{"name":"b","child":{"x":1}}}}',
      "action.tree.child.child: missing required field 'name'" },
    { '{"tree":{"name":"a","child":{"name":"b","extra":1}}}',
      "action.tree.child: unknown field 'extra'" },
    { '{"bag":{"a":1}}', nil },
    { '{"bag":{}}', "action.bag: must have >= 1 fields, got 0" },
    { '{"bag":{"a":1,"b":2,"c":3}}',
      "action.bag: must have <= 2 fields, got 3" },
    { '{"notnum":"x"}', nil },
    { '{"notnum":2}', "action.notnum: matches the schema of 'not'" },
  }

  for _, case in ipairs(cases) do
    it((case[2] and "rejects " or "accepts ") .. case[1], function()
      local s = assert(assert(rt:load(FIX .. "schema_keywords")):open())
      assert(s:reset())
      local out, err, code = s:step(case[1])
      if case[2] == nil then
        assert.is_string(out, err)
      else
        assert.is_nil(out)
        assert.are.equal("ESCHEMA", code)
        assert.are.equal("ESCHEMA: " .. case[2], err)
      end
    end)
  end

  -- Each case: an action schema (Lua source), and what the load error
  -- must say.
  local refused = {
    { '{ m = { type = "strnig" } }', "/properties/m: unknown type 'strnig'" },
    { '{ m = { type = "string", maxLength = 2.5 } }',
      "/properties/m: maxLength must be a non-negative integer" },
    { '{ m = { type = "string", minLength = -1 } }',
      "minLength must be a non-negative integer" },
    { '{ type = "object", required = "m" }',
      "(root): required must be an array of names" },
    { '{ m = { type = "integer", ["if"] = {} } }',
      "keyword 'if' is not supported" },
    { '{ m = { type = "array", uniqueItems = true } }',
      "keyword 'uniqueItems' is not supported" },
    { '{ m = { type = "array", items = { {}, {} } } }',
      "items as a list (tuples) is not supported" },
    { '{ ["$ref"] = "#/$defs/Missing" }', "points at nothing" },
    { '{ ["$ref"] = "other.json#/A" }', "other documents are not loaded" },
    { '{ m = { type = "string", pattern = "(" } }', "pattern: " },
    { '{ m = { type = "number", multipleOf = 0 } }',
      "multipleOf must be a number above 0" },
    { '{ m = { type = "number", minimum = "1" } }',
      "minimum must be a number" },
    { '{ m = { anyOf = {} } }', "anyOf must be a non-empty array" },
  }

  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. dir))

  for i, case in ipairs(refused) do
    it("refuses to load " .. case[1], function()
      local env = dir .. "/e" .. i
      assert(os.execute("mkdir -p " .. env))
      local f = assert(io.open(env .. "/env.lua", "w"))
      f:write("return { action = ", case[1],
        ", step = function() return {} end }\n")
      f:close()
      local loaded, err = rt:load(env)
      assert.is_nil(loaded)
      assert.matches("ELOAD: action schema: EPARSE: schema: ", err, 1, true)
      assert.matches(case[2], err, 1, true)
    end)
  end
end)
