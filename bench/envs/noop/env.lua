-- A do-nothing environment: measures the runtime's own cost per call.
return {
  name = "noop",
  step = function() return {} end,
}
