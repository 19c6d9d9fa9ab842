-- The policy of bench/eval_bench.sh: the same short action every step, so
-- the figure is the runner's cost per step, not the policy's.
local ACTION = { message = "hello" }
return function() return ACTION end
