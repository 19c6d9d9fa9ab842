-- rubrics.sequential: Sequential, run rubrics in order and fail fast.
--
--   local Sequential = require("rubrics.sequential")
--   local r = Sequential(Gate(Compiles()), Gate(PassesTests(), 0.5), Style())
--
-- OpenEnv semantics: an empty Sequential scores 1.0; children run in order;
-- a child scoring exactly 0 (0 or 0.0) stops the run and the result is 0.0
-- (negative scores do not stop: Sequential(-1, 0.3) scores 0.3); otherwise
-- the result is the last child's score (nil when it gave no score).
-- Children given by position are named rubric_0, rubric_1, ... (0-based,
-- as in OpenEnv); named children are given as {name, rubric} records, in
-- the order they run:
--   Sequential{{"compiles", Gate(Compiles())}, {"tests", PassesTests()}}
-- (a map {compiles = ..., tests = ...} is refused: it has no order).
-- Lua access is 1-based: seq[i]
-- and seq:get(i) return the i-th child, #seq and seq:len() the count, and
-- ipairs(seq) iterates them. Like OpenEnv, the children are evaluated
-- before the Sequential's own pre-hooks run (Rubric.children_first_call).
-- A child that waits (an LLMJudge under a driver) simply suspends the whole
-- call; children never overlap.
local Rubric = require("ludo.rubric")

local is_rubric = Rubric.is_rubric
local transient = require("ludo.class").transient

local Sequential = Rubric:extend("Sequential")

-- Sequential(r1, r2, ...) or Sequential{r1, r2, ...}, or {name, rubric}
-- records (see the header): raises when an argument is neither.
function Sequential:init(...)
  local list, n = ..., select("#", ...)
  if n ~= 1 or type(list) ~= "table" or is_rubric(list) then
    list = { ... }
  else
    n = #list
  end
  local count = 0
  for _ in next, list do count = count + 1 end
  for i = 1, n do
    if not is_rubric(list[i]) then count = -1; break end
  end
  if count ~= n then
    -- Records, or an error (ludo.rubric_build).
    transient("ludo.rubric_build").sequential(self, list, n, 3)
    return
  end
  for i = 1, n do self:add_child(("rubric_%d"):format(i - 1), list[i]) end
end

Sequential.__call = Rubric.children_first_call

function Sequential:forward(action, observation)
  local list = self._rb_list
  local n = #list
  if n == 0 then return 1.0 end
  local score
  for i = 1, n do
    score = list[i](action, observation)
    if score == 0 then return 0.0 end
  end
  return score
end

-- Returns the number of children (also #seq).
function Sequential:len()
  return #self._rb_list
end

Sequential.__len = Sequential.len

-- Returns the i-th child (1-based), or nil (also seq[i]).
function Sequential:get(i)
  return self._rb_list[i]
end

return Sequential
