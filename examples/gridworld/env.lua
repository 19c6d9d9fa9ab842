-- The gridworld environment: a maze game whose world lives in C (game.c,
-- registered by the host program as the "game" host module), driven from
-- Lua. reset builds a world from the seed, step moves the agent, the rubric
-- in rubric.lua scores the move.
--
-- Reset options (all optional): seed (the layout; the runner also seeds
-- math.random with it), width, height (2..64, default 8 x 6), max_steps
-- (default width * height).
local game = require("game")     -- host module (C), see game.h
local rubric = require("rubric") -- rubric.lua, next to this file
local null = require("ludo").null

local DEFAULT_W, DEFAULT_H = 8, 6

local env = {
  name = "gridworld",
  description = "Move the agent (A) to the goal (G) around the walls (#).",
  version = "1.0.0",
  concurrent = true,
  action = { move = { "up", "down", "left", "right" } },
  observation = {
    position = { x = "integer", y = "integer" },
    goal = { x = "integer", y = "integer" },
    distance = "integer",        -- shortest path length to the goal
    start_distance = "integer",  -- the same, at reset
    moved = "boolean",           -- false when a wall blocked the move
    board = "string",            -- rows joined by "\n"
    steps = "integer",
  },
  -- JSON Schema form: before the first reset only step_count is known.
  state_schema = {
    type = "object",
    properties = {
      episode_id = { type = "string" },
      step_count = { type = "integer" },
      seed = { type = "integer" },
      width = { type = "integer" },
      height = { type = "integer" },
      position = {
        type = "object",
        properties = { x = { type = "integer" }, y = { type = "integer" } },
      },
    },
    required = { "step_count" },
  },
  rubric = rubric.new(),
}

local world          -- the C world of the current episode
local seed, width, height, max_steps, start_distance
local over = false

local function int_opt(opts, key, default, min, max)
  local v = opts[key]
  if v == nil or v == null then return default end
  if math.type(v) ~= "integer" or v < min or v > max then
    error(string.format("ESCHEMA: reset.%s: expected an integer in "
      .. "[%d, %d]", key, min, max), 0)
  end
  return v
end

local function observe(moved)
  local x, y = world:position()
  local gx, gy = world:goal()
  return {
    position = { x = x, y = y },
    goal = { x = gx, y = gy },
    distance = world:distance(),
    start_distance = start_distance,
    moved = moved,
    board = world:render(),
    steps = world:steps(),
  }
end

function env.reset(opts)
  width = int_opt(opts, "width", DEFAULT_W, 2, 64)
  height = int_opt(opts, "height", DEFAULT_H, 2, 64)
  max_steps = int_opt(opts, "max_steps", width * height, 1, 1 << 20)
  seed = opts.seed
  if math.type(seed) ~= "integer" then
    seed = math.random(0, (1 << 31) - 1) -- runner seeded math.random
  end
  world = game.new(width, height, seed)
  start_distance = world:distance()
  over = false
  return observe(true)
end

function env.step(action)
  if world == nil then
    error("no episode: call reset first", 0)
  end
  if over then
    error("the episode is over (goal reached or step limit): call reset", 0)
  end
  local moved = world:move(action.move)
  local obs = observe(moved)
  over = world:at_goal() or world:steps() >= max_steps
  obs.done = over
  return obs
end

-- The runner adds episode_id and step_count.
function env.state()
  local st = { seed = seed, width = width, height = height }
  if world ~= nil then
    local x, y = world:position()
    st.position = { x = x, y = y }
  end
  return st
end

return env
