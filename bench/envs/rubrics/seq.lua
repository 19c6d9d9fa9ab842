-- Bench: Sequential(Gate(leaf), WeightedSum(3 leaves)).
local R = require("ludo.rubrics")
local L = require("leaves")
return {
  name = "seq",
  action = { x = "number" },
  rubric = R.Sequential(R.Gate(L.C(), 0.0),
    R.WeightedSum({ L.A(), L.B(), L.C() }, { 0.5, 0.3, 0.2 })),
  step = function(action) return { x = action.x } end,
}
