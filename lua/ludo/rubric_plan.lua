-- ludo.rubric_plan: builds the plan of a rubric tree for its outermost
-- calls (see "Plans" in ludo.rubric, which runs it). Loaded transiently (see
-- ludo.class's transient): a state holds it only while it builds.
--
--   plan(root, Rubric, sums, gen) -> P: {gen} alone when the tree may wait

local rawget, getmetatable, type = rawget, getmetatable, type

-- The table a lookup of `forward` on `r` finds it in, and the function
-- found; nil when the lookup would pass through a function `__index` (a
-- lazy class: Rubric.lazy) or finds no function.
local function home_of(r)
  local t = r
  while true do
    local f = rawget(t, "forward")
    if f ~= nil then
      if type(f) ~= "function" then return nil end
      return t, f
    end
    local mt = getmetatable(t)
    local index = type(mt) == "table" and rawget(mt, "__index")
    if type(index) ~= "table" or index == t then return nil end
    t = index
  end
end

local add

local function add_children(P, list, Rubric, sums)
  for i = 1, #list do add(P, list[i], Rubric, sums) end
end

-- Appends the slots of `r` and of its subtree to P (see ludo.rubric).
function add(P, r, Rubric, sums)
  local k = #P + 1
  local mt = getmetatable(r)
  local call = type(mt) == "table" and rawget(mt, "__call")
  local home, f
  if call == Rubric.__call or call == Rubric.children_first_call then
    home, f = home_of(r)
  end
  P[k], P[k + 1], P[k + 2] = r, f or false, home or false
  if home == nil then
    P[k + 3], P[k + 4] = -2, k + 5
  elseif sums[f] then
    local list = rawget(r, "_rb_list") or Rubric._rb_list
    P[k + 3], P[k + 4] = #list, false
    add_children(P, list, Rubric, sums)
    P[k + 4] = #P + 1
  else
    P[k + 3], P[k + 4] = -1, k + 5
  end
end

return function(root, Rubric, sums, gen)
  local P = { gen }
  if not root:is_async() then add(P, root, Rubric, sums) end
  return P
end
