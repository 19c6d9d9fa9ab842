-- Bench: WeightedSum of 3 leaf rubrics.
local R = require("ludo.rubrics")
local L = require("leaves")
return {
  name = "ws3",
  action = { x = "number" },
  rubric = R.WeightedSum({ L.A(), L.B(), L.C() }, { 0.5, 0.3, 0.2 }),
  step = function(action) return { x = action.x } end,
}
