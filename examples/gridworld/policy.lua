-- A policy for the gridworld, for `ludo run --policy`: reads the board
-- text ('#' wall, 'A' agent, 'G' goal, rows joined by "\n"), finds every
-- cell's distance to the goal by breadth-first search and steps to the
-- closest neighbour, so each episode takes the shortest number of moves
-- (the same policy as main.c's, in Lua):
--
--   build/ludo run examples/gridworld --policy examples/gridworld/policy.lua
local MOVES = {
  { "up", 0, -1 }, { "down", 0, 1 }, { "left", -1, 0 }, { "right", 1, 0 },
}

local function parse(board)
  local rows, ax, ay, gx, gy = {}, nil, nil, nil, nil
  for line in (board .. "\n"):gmatch("([^\n]*)\n") do
    rows[#rows + 1] = line
    local y = #rows
    local a, g = line:find("A", 1, true), line:find("G", 1, true)
    if a then ax, ay = a, y end
    if g then gx, gy = g, y end
  end
  return rows, ax, ay, gx, gy
end

local function act(observation)
  local rows, ax, ay, gx, gy = parse(observation.board)
  if not ax or not gx then return { move = "up" } end
  local dist, queue, head = { [gy * 100 + gx] = 0 }, { { gx, gy } }, 1
  while queue[head] do
    local x, y = queue[head][1], queue[head][2]
    head = head + 1
    for _, m in ipairs(MOVES) do
      local nx, ny = x + m[2], y + m[3]
      local row = rows[ny]
      local cell = row and row:sub(nx, nx) or ""
      if cell ~= "" and cell ~= "#" and not dist[ny * 100 + nx] then
        dist[ny * 100 + nx] = dist[y * 100 + x] + 1
        queue[#queue + 1] = { nx, ny }
      end
    end
  end
  local best, bestd = "up", math.huge
  for _, m in ipairs(MOVES) do
    local d = dist[(ay + m[3]) * 100 + ax + m[2]]
    if d and d < bestd then best, bestd = m[1], d end
  end
  return { move = best }
end

return { act = act }
