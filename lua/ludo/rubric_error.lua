-- ludo.rubric_error: the texts of the errors a rubric call raises (see
-- "Errors" in ludo.rubric): a forward that returned something other than a
-- number or nil, a container whose child gave no score, and the path of
-- the rubric that failed, put before every error by the outermost call.
-- Loaded transiently (see ludo.class's transient): only when an error is
-- raised.
local type, error, format, tostring, pcall, require, rawget =
  type, error, string.format, tostring, pcall, require, rawget

local E = {}

-- "chunk:line" where the Lua function `f` is defined, or nil when that is
-- not known (a C function, stripped code). A stock Lua has the debug
-- library; a ludo session has none, and ludo.core.where instead.
local function where(f)
  if type(f) ~= "function" then return nil end
  local at
  local dbg = type(_G) == "table" and rawget(_G, "debug") -- a session: nil
  if type(dbg) == "table" and type(dbg.getinfo) == "function" then
    local info = dbg.getinfo(f, "S")
    if info and info.what ~= "C" and info.linedefined > 0 then
      at = info.short_src .. ":" .. info.linedefined
    end
  else
    local ok, core = pcall(require, "ludo.core")
    if ok and type(core) == "table" and type(core.where) == "function" then
      at = core.where(f)
    end
  end
  if at and at:sub(1, 2) ~= "?:" then return at end
end
E.where = where

-- The class name of rubric `r` ("Correct").
local function class_name(r)
  return tostring(r.__name or "Rubric")
end

-- Raises: rubric `r`'s forward (or its method `name`, whose result forward
-- returns: a trajectory rubric's score_trajectory) returned `v`, neither a
-- number nor nil. (Called by the rubric's own call, so the path is added
-- by the outermost call.)
function E.bad_score(r, v, name)
  local t, shown = type(v), ""
  if t == "string" then
    local s = #v > 40 and v:sub(1, 40) .. "..." or v
    shown = " (" .. format("%q", s):gsub("\\\n", "\\n") .. ")"
  elseif t == "boolean" then
    shown = " (" .. tostring(v) .. ")"
  end
  name = name or "forward"
  local at = where(r[name])
  error(format("%s%s returned a %s%s; a rubric must return a number, "
    .. "or nil for no score", name, at and " (defined at " .. at .. ")" or "",
    t, shown), 0)
end

-- Why each container needs a number from its children.
local NEEDS = {
  Gate = "a Gate compares its child's score with its threshold",
  WeightedSum = "a WeightedSum adds up its children's scores times their \z
    weights",
}

-- Raises: the i-th child of container `r` gave no score (nil), which the
-- container cannot combine.
function E.no_score(r, i)
  error(format("child %s gave no score (nil); %s", tostring(r._rb_map[i]),
    NEEDS[r.__name] or class_name(r) .. " needs a number from each child"),
    0)
end

-- The dotted path of `target` in the tree of `root` ("" for the root), or
-- nil when it is not in the tree.
local function path_of(root, target)
  if root == target then return "" end
  for name, r in root:named_rubrics() do
    if r == target then return name end
  end
end

-- The text of error `err` raised while the outermost rubric call, of
-- `root`, was in progress; `failed` is the innermost rubric call that was
-- in progress (see "Errors" in ludo.rubric).
function E.message(root, failed, err)
  local path = ""
  if failed ~= nil then path = path_of(root, failed) end
  local who
  if path == "" then
    who = format("the root rubric (%s)", class_name(root))
  elseif path then
    who = format("rubric %s (%s)", path, class_name(failed))
  else
    who = format("a %s rubric outside the tree of the root rubric (%s)",
      class_name(failed), class_name(root))
  end
  return who .. ": " .. err
end

-- Loaded through class.transient (see ludo.class).
return E
