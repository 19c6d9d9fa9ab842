-- Unit tests of the quiz's rubrics, with busted and a stock lua5.4.
local quiz = require("quiz_rubrics")

describe("the quiz rubrics", function()
  local asked = { a = 3, b = 4 }

  it("Format wants digits", function()
    assert.are.equal(1.0, quiz.Format()({ answer = "7" }, asked))
    assert.are.equal(0.0, quiz.Format()({ answer = "seven" }, asked))
  end)

  it("Correct wants the sum", function()
    assert.are.equal(1.0, quiz.Correct()({ answer = "7" }, asked))
    assert.are.equal(0.0, quiz.Correct()({ answer = "8" }, asked))
  end)

  it("the reward weighs them 0.2 and 0.8, by name", function()
    local reward = quiz.new()
    assert.are.equal(1.0, reward({ answer = "7" }, asked))
    assert.are.equal(0.2, reward({ answer = "8" }, asked))
    assert.are.equal(0.0, reward.correct.last_score)
    local names = {}
    for name in reward:named_rubrics() do names[#names + 1] = name end
    assert.are.same({ "correct", "format" }, names)
  end)

  it("a forward returning something else fails, naming the rubric",
    function()
      local reward = quiz.new()
      function reward.correct.forward() return true end
      local ok, err = pcall(reward, { answer = "7" }, asked)
      assert.is_false(ok)
      assert.matches("^rubric correct %(Correct%): forward %(defined at "
        .. "quiz_spec.lua:%d+%) returned a boolean %(true%)", err)
    end)
end)
