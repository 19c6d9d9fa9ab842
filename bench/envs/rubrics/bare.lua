-- Bench: the bare step the rubric benches compare against.
return {
  name = "bare",
  action = { x = "number" },
  step = function(action) return { x = action.x } end,
}
