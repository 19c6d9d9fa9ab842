-- The trivia environment of the evaluation example (examples/eval/): each
-- episode asks one question from a small test split; the agent answers
-- once, with a short answer and a one-line explanation. The reward is a
-- weighted sum of two rubrics: an exact match of the answer (0.7) and an
-- LLM judge rating the explanation (0.3), so an evaluation shows both a
-- programmatic and a model-graded score per episode.
--
-- The judge is a ludo.llm client: its base URL comes from the environment
-- variable LUDO_JUDGE_URL (the example points it at the mock LLM server),
-- its key from LUDO_JUDGE_KEY. Environment code may use ludo.llm only
-- where the host allows it (`ludo eval` does; see docs/llm.md).
local rubrics = require("trivia_rubrics")

local env = {
  name = "trivia",
  description = "One trivia question per episode: a short answer and a "
    .. "one-line explanation, scored by exact match and an LLM judge.",
  action = { answer = "string", explanation = "string?" },
  observation = { id = "string", question = "string", expected = "string?" },
  rubric = rubrics.new(),
}

local QUESTIONS = {
  { "What is the capital of France?", "Paris" },
  { "What is the chemical symbol for gold?", "Au" },
  { "How many legs does a spider have?", "8" },
  { "Which planet is known as the red planet?", "Mars" },
  { "What is the largest ocean on Earth?", "Pacific" },
  { "Who wrote 'Hamlet'?", "Shakespeare" },
  { "What is the square root of 81?", "9" },
  { "What gas do plants absorb from the air?", "CO2" },
  { "In which year did the first person walk on the Moon?", "1969" },
  { "What is the boiling point of water at sea level in Celsius?", "100" },
  { "Which element has atomic number 1?", "Hydrogen" },
  { "What is the longest river in South America?", "Amazon" },
}

local function task(split, index)
  local q = split == "test" and QUESTIONS[index + 1]
  if not q then return nil end
  return { id = "q" .. index, split = split, index = index, question = q[1] }
end

env.tasks = {
  splits = { "test" },
  count = function(split) return split == "test" and #QUESTIONS or 0 end,
  get = task,
}

local current

function env.reset(opts)
  local t = opts.task or task("test", math.random(0, #QUESTIONS - 1))
  current = { id = t.id, question = t.question,
    answer = QUESTIONS[t.index + 1][2] }
  return { id = t.id, question = t.question }
end

function env.step(action) -- luacheck: ignore 212
  -- The expected answer is shown once the episode is over, so the
  -- rubric (and the trajectory) can compare.
  return { id = current.id, question = current.question,
    expected = current.answer, done = true }
end

return env
