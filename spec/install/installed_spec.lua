-- Run by scripts/test-install.sh with the installed modules only (LUA_PATH
-- and LUA_CPATH from `ludo lua-path` of the installed binary): the Lua
-- library, the rubrics and the C modules all load from the prefix.
describe("an installed ludo", function()
  it("gives stock Lua its JSON C module", function()
    local json = require("ludo.json")
    assert.are.equal('{"a":[1,2.5]}', json.encode(json.decode('{"a":[1,2.5]}')))
    assert.is_truthy(package.searchpath("ludo.json", package.cpath)
      :find(os.getenv("LUDO_PREFIX"), 1, true))
  end)

  it("gives stock Lua ludo.re and the rubric library", function()
    local re = require("ludo.re")
    assert.are.equal(3, (re.find("abcabc", "c(a)")))
    local R = require("ludo.rubrics")
    local One = R.Rubric:extend("One")
    function One:forward() return 1.0 end
    assert.are.equal(1.0, R.WeightedSum({ One() }, { 1.0 })({}, {}))
  end)

  it("runs a session through ludo.host", function()
    local host = require("ludo.host")
    local rt = assert(host.runtime({ prewarm = 0 }))
    local env = assert(rt:load(os.getenv("LUDO_SRC") .. "/examples/echo"))
    local s = assert(env:open())
    assert(s:reset())
    assert.is_truthy(assert(s:step('{"message":"hi"}')):find('"hi"', 1, true))
    rt:close()
  end)
end)
