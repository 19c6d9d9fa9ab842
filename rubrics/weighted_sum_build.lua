-- rubrics.weighted_sum_build: the work of WeightedSum's constructor (see
-- rubrics.weighted_sum), which runs only while a tree is built (the errors
-- of the positional form are raised by rubrics.weighted_sum_cold). Loaded
-- transiently (see ludo.class's transient), so an idle session state does
-- not hold it.
local Rubric = require("ludo.rubric")

local is_rubric = Rubric.is_rubric
local type, error, format, next, tostring =
  type, error, string.format, next, tostring

local B = {}

-- The named forms (see rubrics.weighted_sum): returns names, rubrics and
-- weights (arrays in child order), raising at `level` + 1.
local function named(rubrics, weights, level)
  level = level + 1
  local build = require("ludo.class").transient("ludo.rubric_build")
  local names, list, w, map = build.entries("WeightedSum", rubrics, 3, nil,
    level)
  if map then
    if type(weights) ~= "table" or #weights > 0 then
      error(format("WeightedSum: the rubrics are a map of name = rubric, \z
        so the weights must be a map of name = weight, got %s",
        type(weights) == "table" and "an array" or type(weights)), level)
    end
    w = {}
    for i = 1, #names do
      local x = weights[names[i]]
      if x == nil then
        error(format("WeightedSum: no weight for rubric %q", names[i]),
          level)
      end
      w[i] = x
    end
    for k in next, weights do
      if type(k) ~= "string" or not is_rubric(rubrics[k]) then
        error(format("WeightedSum: the weight %s has no rubric",
          type(k) == "string" and format("%q", k) or tostring(k)), level)
      end
    end
  elseif weights ~= nil then
    error("WeightedSum: the weights are in the {name, rubric, weight} \z
      records; the second argument must be nil, got " .. type(weights),
      level)
  end
  for i = 1, #names do
    if type(w[i]) ~= "number" then
      error(format("WeightedSum: the weight of %q must be a number, got %s",
        names[i], type(w[i])), level)
    end
  end
  return names, list, w
end

-- WeightedSum:init(rubrics, weights) (rubrics.weighted_sum's init
-- tail-calls this). The errors of the positional form are raised by the
-- _ws_bad_init method (rubrics.weighted_sum_cold).
function B.init(self, rubrics, weights)
  local n = type(rubrics) == "table" and not is_rubric(rubrics) and #rubrics
  local first = n and rubrics[1]
  local names, copy, total = nil, {}, nil
  if n and (n == 0 and next(rubrics) ~= nil
      or type(first) == "table" and not is_rubric(first)) then
    -- Named children. (Frames: named, B.init, the class's call, the
    -- caller.)
    names, rubrics, copy = named(rubrics, weights, 3)
    n, total = #names, 0
    for i = 1, n do total = total + copy[i] end
  elseif n and type(weights) == "table" and #weights == n then
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
  if names == nil and total then
    -- An array of rubrics with names besides.
    local k
    for key in next, rubrics do
      if math.type(key) ~= "integer" or key < 1 or key > n then
        k = key
        break
      end
    end
    if k ~= nil then
      require("ludo.class").transient("ludo.rubric_build")
        .mixed("WeightedSum", k, 3)
    end
  end
  -- Written so that a NaN sum fails too.
  if not (total and math.abs(total - 1.0) <= 1e-6) then
    if names then
      error("Weights must sum to 1.0, got "
        .. require("ludo.jsontext").number(total), 3)
    end
    self:_ws_bad_init(rubrics, weights)
  end
  for i = 1, n do
    -- (Frames: add_child, B.init, the class's call, the caller.)
    self:add_child(names and names[i] or ("rubric_%d"):format(i - 1),
      rubrics[i], false, 4)
  end
  self._ws_weights = copy
end

-- Loaded through class.transient (see ludo.class).
return B
