-- rubrics.trajectory: TrajectoryRubric, scores whole episodes.
--
--   local TrajectoryRubric = require("rubrics.trajectory")
--   local Win = TrajectoryRubric:extend("Win")
--   function Win:score_trajectory(traj)
--     return traj[#traj].observation.winner == "me" and 1.0 or 0.0
--   end
--   function Win:compute_step_rewards() ... end
--
-- OpenEnv semantics: each call appends the step {action = a,
-- observation = o} and returns score_trajectory(trajectory) when the
-- observation is done, else intermediate_reward. An observation is done
-- when observation.done is truthy as Python reads it (OpenEnv's
-- `if done:`): set and not false, 0, ludo.null, "" or an empty table;
-- values that are not tables (or userdata) are never done. The trajectory
-- is not cleared on done: later calls keep appending until reset().
-- Subclasses implement score_trajectory(trajectory) -> number and
-- compute_step_rewards() -> array of per-step rewards.
--
-- Stored steps are plain data: actions and observations are deep-copied
-- (functions, userdata and threads become their tostring, metatables are
-- dropped, cycles become the string "<cycle>", ludo.null stays ludo.null),
-- so no live host object stays referenced.
--
-- Streaming (ludo): when `streaming` is true (class field or constructor
-- option) no trajectory is kept, so memory is O(1) in the episode length.
-- The subclass folds each step into an accumulator instead:
--   start() -> acc                       (called before the first step)
--   fold(acc, action, observation) -> acc
--   finish(acc, steps) -> score          (pure; called on done and by
--                                         compute_step_rewards)
-- steps() returns the step count in both modes; trajectory() raises in
-- streaming mode. rubrics.exponential_discounting works in both modes.
local Rubric = require("ludo.rubric")
local null = require("ludo.null")
local transient = require("ludo.class").transient

local type, error, format, pairs, tostring, next, rawset, mtype =
  type, error, string.format, pairs, tostring, next, rawset, math.type

local TrajectoryRubric = Rubric:extend("TrajectoryRubric")

-- Default mode: keep the whole trajectory.
TrajectoryRubric.streaming = false

local function plain(v, active, memo)
  -- Deep copy into plain data, see the header.
  local tv = type(v)
  if tv == "table" then
    if v == null then return v end
    if active[v] then return "<cycle>" end
    local done = memo[v]
    if done ~= nil then return done end
    active[v] = true
    local copy = {}
    for k, x in next, v do
      local tk = type(k)
      if tk ~= "string" and tk ~= "number" and tk ~= "boolean" then
        k = tostring(k)
      end
      copy[k] = plain(x, active, memo)
    end
    active[v] = nil
    memo[v] = copy
    return copy
  elseif tv == "function" or tv == "userdata" or tv == "thread" then
    return tostring(v)
  end
  return v
end

-- Returns a plain-data deep copy of `v` (see the header).
function TrajectoryRubric.plain_copy(v)
  local tv = type(v)
  if tv ~= "table" then
    if tv == "function" or tv == "userdata" or tv == "thread" then
      return tostring(v)
    end
    return v
  end
  if v == null then return v end
  -- Fast path for flat tables of plain values, the common step shape; any
  -- nested table or odd value falls back to the full copy.
  local copy = {}
  for k, x in next, v do
    local tx, tk = type(x), type(k)
    if tx == "table" or tx == "function" or tx == "userdata"
      or tx == "thread" or (tk ~= "string" and tk ~= "number"
      and tk ~= "boolean") then
      return plain(v, {}, {})
    end
    copy[k] = x
  end
  return copy
end
local plain_copy = TrajectoryRubric.plain_copy

-- Returns true when `observation` counts as done (see the header).
function TrajectoryRubric.is_done(observation)
  local t = type(observation)
  if t ~= "table" and t ~= "userdata" then return false end
  local d = observation.done
  if d == nil or d == false or d == 0 or d == null or d == "" then
    return false
  end
  return type(d) ~= "table" or next(d) ~= nil
end
local is_done = TrajectoryRubric.is_done

local function read_options(who, level, opts, names)
  -- Accepts an options table or positional values for `names`.
  if type(opts[1]) == "table" and opts.n == 1 then
    local t = opts[1]
    for k in pairs(t) do
      local known = false
      for i = 1, #names do if names[i] == k then known = true end end
      if not known and k ~= "streaming" then
        error(format("%s: unknown option %q", who, tostring(k)), level + 1)
      end
    end
    return t
  end
  local t = {}
  for i = 1, #names do t[names[i]] = opts[i] end
  return t
end
TrajectoryRubric.read_options = read_options

local function set_intermediate(self, who, v, level)
  if v == nil then v = 0.0 end
  if type(v) ~= "number" then
    error(format("%s: intermediate_reward must be a number, got %s", who,
      type(v)), level + 1)
  end
  self.intermediate_reward = v
end

-- TrajectoryRubric{intermediate_reward = 0.0, streaming = false} or
-- TrajectoryRubric(intermediate_reward).
function TrajectoryRubric:init(...)
  local o = read_options(self.__name, 3, table.pack(...),
    { "intermediate_reward" })
  self:_traj_setup(o, 4)
end

-- Applies the common options; subclasses' init call it.
function TrajectoryRubric:_traj_setup(o, level)
  local who = self.__name
  set_intermediate(self, who, o.intermediate_reward, level)
  -- A raw copy of the mode, so forward reads it without an __index walk.
  local streaming = self.streaming
  if o.streaming ~= nil then streaming = o.streaming == true end
  rawset(self, "streaming", streaming == true)
  self._tr_steps = 0
  self._tr_traj = {}
  self._tr_acc = nil
end

-- Returns `score`, what method `name` of self returned, when forward may
-- return it (a number or nil); else raises naming that method, not forward.
local function checked(self, name, score)
  if score ~= nil and mtype(score) == nil then
    transient("ludo.rubric_error").bad_score(self, score, name)
  end
  return score
end

function TrajectoryRubric:forward(action, observation)
  local n = self._tr_steps + 1
  self._tr_steps = n
  local done = is_done(observation)
  if self.streaming then
    local acc = self._tr_acc
    if n == 1 then acc = self:start() end
    acc = self:fold(acc, action, observation)
    self._tr_acc = acc
    if done then return checked(self, "finish", self:finish(acc, n)) end
    return self.intermediate_reward
  end
  local traj = self._tr_traj
  traj[n] = {
    action = plain_copy(action), observation = plain_copy(observation),
  }
  if done then
    return checked(self, "score_trajectory", self:score_trajectory(traj))
  end
  return self.intermediate_reward
end

-- Returns the final score of the steps so far: score_trajectory of the
-- trajectory, or finish(acc, steps) in streaming mode.
function TrajectoryRubric:final_score()
  if self.streaming then
    return self:finish(self._tr_acc, self._tr_steps)
  end
  return self:score_trajectory(self._tr_traj)
end

-- Returns the number of steps since the last reset.
function TrajectoryRubric:steps()
  return self._tr_steps
end

-- Returns a copy of the trajectory: an array of {action, observation}
-- steps (the steps themselves are shared; do not modify them).
function TrajectoryRubric:trajectory()
  if self.streaming then
    error(self.__name .. ": a streaming trajectory rubric keeps no "
      .. "trajectory (use steps(), or streaming = false)", 2)
  end
  local traj, copy = self._tr_traj, {}
  for i = 1, #traj do copy[i] = traj[i] end
  return copy
end

-- Clears the trajectory (or accumulator), then resets children.
function TrajectoryRubric:reset()
  self._tr_steps = 0
  self._tr_traj = {}
  self._tr_acc = nil
  TrajectoryRubric.super.reset(self)
end

local function abstract(self, name, sig)
  error(format("%s.%s is not implemented: subclasses of TrajectoryRubric "
    .. "must define %s", self.__name, name, sig), 0)
end

-- Scores a whole trajectory (an array of {action, observation}).
function TrajectoryRubric:score_trajectory(trajectory) -- luacheck: ignore 212
  abstract(self, "score_trajectory", "score_trajectory(trajectory)")
end

-- Returns the per-step rewards of the steps so far (an array).
function TrajectoryRubric:compute_step_rewards()
  abstract(self, "compute_step_rewards", "compute_step_rewards()")
end

-- Streaming: returns the accumulator for a new episode (default nil).
function TrajectoryRubric:start() end -- luacheck: ignore 212

-- Streaming: folds one step into the accumulator.
function TrajectoryRubric:fold(acc, action, observation) -- luacheck: ignore
  abstract(self, "fold", "fold(acc, action, observation) in streaming mode")
end

-- Streaming: the score from the accumulator after `steps` steps.
function TrajectoryRubric:finish(acc, steps) -- luacheck: ignore 212
  abstract(self, "finish", "finish(acc, steps) in streaming mode")
end

-- Adds `intermediate_reward` to the base state.
function TrajectoryRubric:state_dict()
  local s = TrajectoryRubric.super.state_dict(self)
  s.intermediate_reward = self.intermediate_reward
  return s
end

function TrajectoryRubric:load_state_dict(state)
  TrajectoryRubric.super.load_state_dict(self, state)
  if state.intermediate_reward ~= nil then
    set_intermediate(self, self.__name .. ": load_state_dict",
      state.intermediate_reward, 2)
  end
end

return TrajectoryRubric
