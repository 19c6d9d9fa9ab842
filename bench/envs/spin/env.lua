-- Bench: a step that keeps the CPU busy for action.n loop turns, with no
-- call out of Lua (bench/core_bench.c measures how long a time-budgeted
-- ludo_runtime_poll takes while this runs).
return {
  name = "spin",
  step = function(action)
    local x = 0
    for i = 1, action.n do x = x + i end
    return { x = x }
  end,
}
