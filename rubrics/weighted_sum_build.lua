-- rubrics.weighted_sum_build: the work of WeightedSum's constructor (see
-- rubrics.weighted_sum), which runs only while a tree is built (its errors
-- are raised by rubrics.weighted_sum_cold). Loaded transiently (see
-- ludo.class's transient), so an idle session state does not hold it.
local Rubric = require("ludo.rubric")

local is_rubric = Rubric.is_rubric

local B = {}

-- WeightedSum:init(rubrics, weights) (rubrics.weighted_sum's init
-- tail-calls this). Its errors are raised by the _ws_bad_init method
-- (rubrics.weighted_sum_cold).
function B.init(self, rubrics, weights)
  local n = type(rubrics) == "table" and not is_rubric(rubrics) and #rubrics
  local copy, total = {}, nil
  if n and type(weights) == "table" and #weights == n then
    total = 0
    for i = 1, n do
      local w = weights[i]
      -- (tonumber(w) == w: w is a number. Comparing type(w) with "number"
      -- would intern that string in the state at every build.)
      if tonumber(w) ~= w or not is_rubric(rubrics[i]) then
        total = nil
        break
      end
      copy[i] = w
      total = total + w
    end
  end
  -- Written so that a NaN sum fails too.
  if not (total and math.abs(total - 1.0) <= 1e-6) then
    self:_ws_bad_init(rubrics, weights)
  end
  for i = 1, n do
    self:add_child(("rubric_%d"):format(i - 1), rubrics[i])
  end
  self._ws_weights = copy
end

-- Loaded through class.transient (see ludo.class).
return B
