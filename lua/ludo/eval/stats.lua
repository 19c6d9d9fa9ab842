-- ludo.eval.stats: the statistics of an evaluation's summary (pure Lua,
-- no state): descriptive statistics with a Student-t 95% confidence
-- interval, the Wilson interval of a proportion, the unbiased pass@k
-- estimator, quantiles, and the fixed rounding of every float written.
local M = {}

local sqrt, atan, cos, sin, floor, abs, max, huge =
  math.sqrt, math.atan, math.cos, math.sin, math.floor, math.abs, math.max,
  math.huge
local tonumber, format, sort = tonumber, string.format, table.sort

-- The normal quantile of 0.975.
local Z975 = 1.959963984540054

-- Returns float `x` rounded to 10 significant digits (nil stays nil,
-- NaN and infinities become nil, integers become floats). Every float
-- of the summary goes through here, so its text does not depend on the
-- last bits of a sum.
function M.round(x)
  if x == nil or x ~= x or x == huge or x == -huge then return nil end
  return tonumber(format("%.10g", x)) + 0.0
end

-- P(|T| <= t) for Student's t with integer `df` degrees of freedom, by
-- the finite series of Abramowitz & Stegun 26.7.3-4 (exact up to
-- rounding; O(df) terms).
local function t_central(t, df)
  local theta = atan(t / sqrt(df))
  local c2 = cos(theta) ^ 2
  if df % 2 == 1 then
    local sum, term = 0.0, 1.0
    if df > 1 then
      sum = 1.0
      for j = 3, df - 2, 2 do
        term = term * c2 * (j - 1) / j
        sum = sum + term
      end
      sum = sum * sin(theta) * cos(theta)
    end
    return 2 / math.pi * (theta + sum)
  end
  local sum, term = 1.0, 1.0
  for j = 2, df - 2, 2 do
    term = term * c2 * (j - 1) / j
    sum = sum + term
  end
  return sin(theta) * sum
end

-- The Cornish-Fisher expansion of the t quantile around the normal one
-- (Abramowitz & Stegun 26.7.5), for large df where it is exact to far
-- below the rounding of M.round.
local function t_expansion(df)
  local z = Z975
  local z3, z5, z7, z9 = z ^ 3, z ^ 5, z ^ 7, z ^ 9
  return z + (z3 + z) / (4 * df)
    + (5 * z5 + 16 * z3 + 3 * z) / (96 * df ^ 2)
    + (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * df ^ 3)
    + (79 * z9 + 776 * z7 + 1482 * z5 - 1920 * z3 - 945 * z)
      / (92160 * df ^ 4)
end

-- The series is used up to this many degrees of freedom, the expansion
-- above it.
M.T_SERIES_MAX = 200

-- Returns the 0.975 quantile of Student's t with `df` (>= 1, integer)
-- degrees of freedom: 12.706 for 1, 2.228 for 10, tending to 1.960.
function M.t975(df)
  if df > M.T_SERIES_MAX then return t_expansion(df) end
  local lo, hi = 0.0, 20.0
  if df == 1 then hi = 13.0 end
  for _ = 1, 80 do
    local mid = (lo + hi) / 2
    if t_central(mid, df) < 0.95 then lo = mid else hi = mid end
  end
  return (lo + hi) / 2
end

-- Descriptive statistics of the numbers in array `xs` (in the order
-- given; callers pass them in episode order so sums are reproducible):
-- {n, mean, std (sample, n-1), ci95 = {lo, hi} (Student t), min, max}.
-- Fields that need more values than there are are nil: mean, min, max
-- for n = 0; std and ci95 for n < 2. Floats are rounded by M.round; a
-- std below 1e-12 of the largest magnitude is 0 (rounding noise).
function M.describe(xs)
  local n = #xs
  local out = { n = n }
  if n == 0 then return out end
  -- Neumaier's compensated sum: the mean is correctly rounded in
  -- practice, so n equal values have exactly that mean and a std of 0.
  local sum, comp, lo, hi = 0.0, 0.0, xs[1], xs[1]
  for i = 1, n do
    local x = xs[i]
    local t = sum + x
    if abs(sum) >= abs(x) then
      comp = comp + ((sum - t) + x)
    else
      comp = comp + ((x - t) + sum)
    end
    sum = t
    if x < lo then lo = x end
    if x > hi then hi = x end
  end
  local mean = (sum + comp) / n
  out.mean, out.min, out.max = M.round(mean), M.round(lo), M.round(hi)
  if n < 2 then return out end
  -- Two passes: the sum of squared deviations from the mean, which does
  -- not lose precision as the one-pass formula does.
  local ss = 0.0
  for i = 1, n do
    local d = xs[i] - mean
    ss = ss + d * d
  end
  local std = sqrt(ss / (n - 1))
  -- A spread within 64 units in the last place of the values' magnitude
  -- is the rounding of their sums (6.46 written as 6.460000000000001),
  -- not a spread; past it a spread is real, however small beside the
  -- values (1e9 + U(0, 1e-3) has a std of 2.9e-4, 2,000 units).
  if std <= 64 * 2 ^ -52 * max(abs(lo), abs(hi)) then std = 0.0 end
  local half = M.t975(n - 1) * std / sqrt(n)
  out.std = M.round(std)
  out.ci95 = { M.round(mean - half), M.round(mean + half) }
  return out
end

-- The Wilson score interval (95%) of `k` successes out of `n` (> 0)
-- trials: {lo, hi}, which stays inside [0, 1] and is not empty at 0 or n.
-- At k = 0 the lower bound is exactly 0 and at k = n the upper bound
-- exactly 1 (center - half there is 0 in exact arithmetic; in floats it
-- can come out as 5.55e-17).
function M.wilson(k, n)
  local p, z2 = k / n, Z975 * Z975
  local denom = 1 + z2 / n
  local center = (p + z2 / (2 * n)) / denom
  local half = Z975 * sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
  local lo, hi = center - half, center + half
  if lo < 0 or k <= 0 then lo = 0.0 end
  if hi > 1 or k >= n then hi = 1.0 end
  return { M.round(lo), M.round(hi) }
end

-- The unbiased pass@k estimate for one task with `n` attempts of which
-- `c` succeeded: 1 - C(n-c, k) / C(n, k), the chance that k attempts drawn
-- without replacement hold at least one success. Computed as
-- 1 - prod_{i=n-c+1}^{n} (1 - k/i), which never forms a binomial
-- coefficient (no overflow at any n). Requires 1 <= k <= n; returns nil
-- when k > n (the estimator is undefined).
function M.pass_at_k(n, c, k)
  if k > n or k < 1 then return nil end
  if n - c < k then return 1.0 end
  local prod = 1.0
  for i = n - c + 1, n do
    prod = prod * (1 - k / i)
  end
  return 1.0 - prod
end

-- The q-quantile (0 <= q <= 1) of the numbers in `xs` by linear
-- interpolation between order statistics (type 7, as numpy's default).
-- Sorts a copy; nil for an empty array.
function M.quantile(xs, q)
  local n = #xs
  if n == 0 then return nil end
  local s = {}
  for i = 1, n do s[i] = xs[i] end
  sort(s)
  local h = (n - 1) * q + 1
  local i = floor(h)
  if i >= n then return s[n] + 0.0 end
  return s[i] + (h - i) * (s[i + 1] - s[i])
end

-- The largest number of bins of a histogram.
M.MAX_BINS = 40

-- Bins the numbers of `xs` for a histogram: returns `edges` (k+1
-- increasing numbers) and `counts` (k integers summing to #xs). Integer
-- data spanning at most M.MAX_BINS values get one bin per integer
-- (edges at the half-integers); other data ceil(sqrt(n)) equal bins
-- (at most M.MAX_BINS) from the minimum to the maximum. An empty `xs`
-- gives no bins; equal values one bin of width 1 around them.
function M.bins(xs)
  local n = #xs
  if n == 0 then return {}, {} end
  local lo, hi, ints = xs[1], xs[1], true
  for i = 1, n do
    local x = xs[i]
    if x < lo then lo = x end
    if x > hi then hi = x end
    if ints and x ~= floor(x) then ints = false end
  end
  local k, start, width
  if ints and hi - lo + 1 <= M.MAX_BINS then
    k, start, width = floor(hi - lo) + 1, lo - 0.5, 1.0
  elseif hi == lo then
    k, start, width = 1, lo - 0.5, 1.0
  else
    k = math.min(M.MAX_BINS, math.max(1, math.ceil(sqrt(n))))
    start, width = lo + 0.0, (hi - lo) / k
  end
  local edges, counts = {}, {}
  for i = 0, k do edges[i + 1] = start + i * width end
  for i = 1, k do counts[i] = 0 end
  for i = 1, n do
    local b = floor((xs[i] - start) / width) + 1
    if b > k then b = k elseif b < 1 then b = 1 end
    counts[b] = counts[b] + 1
  end
  return edges, counts
end

return M
