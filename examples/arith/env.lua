-- The arith environment: a small dataset of arithmetic problems in two
-- splits, served as tasks (docs/environments.md "Tasks"). A trainer lists
-- them (OpenEnv's Task API: GET /arith/splits, POST /arith/tasks, ...)
-- and picks one per episode with reset {"split": "test", "index": 3};
-- without an index, the episode draws a training problem from its seed.
-- The task a trainer sees is the question without its answer.
local env = {
  name = "arith",
  description = "Arithmetic problems in train and test splits; one answer "
    .. "per episode.",
  action = { answer = "integer" },
  observation = { id = "string", question = "string", correct = "boolean?" },
}

-- The dataset: train is generated (the same 50 problems in every state),
-- test is written out.
local PROBLEMS = { train = {}, test = {
  { "12 * 12", 144 }, { "7 + 35", 42 }, { "100 - 58", 42 },
  { "81 / 9", 9 }, { "2 ^ 10", 1024 },
} }
for i = 1, 50 do
  local a, b = i * 7 % 23 + 1, i * 11 % 17 + 1
  PROBLEMS.train[i] = { ("%d + %d"):format(a, b), a + b }
end

-- The task at a 0-based index: what a trainer sees (no answer).
local function task(split, index)
  local p = PROBLEMS[split][index + 1]
  if p == nil then return nil end
  return { id = split .. "-" .. index, split = split, index = index,
    question = p[1] }
end

env.tasks = {
  splits = { "train", "test" },
  count = function(split) return #PROBLEMS[split] end,
  get = task,
  -- list and range are derived from get and count
}

local current -- the problem of this episode: {question, answer}

function env.reset(opts)
  local t = opts.task -- the runtime looked it up from split and index
  if t == nil then
    t = task("train", math.random(0, #PROBLEMS.train - 1))
  end
  current = { id = t.id, answer = PROBLEMS[t.split][t.index + 1][2] }
  return { id = t.id, question = t.question }
end

function env.step(action)
  local ok = action.answer == current.answer
  return { id = current.id, question = "", correct = ok,
    reward = ok and 1.0 or 0.0, done = true }
end

return env
