-- examples/rubrics/format_check.lua: a format-check rubric built on ludo.re.
--
-- FormatCheck scores a model's reply by its shape: 1.0 for
-- "<think>...</think> <answer>...</answer>" with nothing around it, 0.25
-- when there is an <answer> block but the shape is wrong, 0.0 otherwise.
-- It uses PCRE (lazy quantifiers, (?s)), which only the ludo runtime's
-- pcre2 binding `ludo.re` provides:
--
--   local FormatCheck = require("examples.rubrics.format_check")
--   local r = FormatCheck()              -- or FormatCheck(custom_pattern)
--   r({ text = reply }, observation)     -- or r(reply_string, observation)
--
-- As a module it always loads and returns the class; building one without
-- ludo.re raises a clear error. Run as a script it scores a few replies,
-- or, under a stock lua5.4 without ludo.re, says why it cannot and exits 0.
local Rubric = require("ludo.rubric")

local have_re, re = pcall(require, "ludo.re")

local FormatCheck = Rubric:extend("FormatCheck")

-- The default shape: think block, then answer block, nothing else.
FormatCheck.PATTERN =
  [[(?s)^\s*<think>(.+?)</think>\s*<answer>(.+?)</answer>\s*$]]

-- True when ludo.re could be loaded; else `unavailable` says why.
FormatCheck.available = have_re
FormatCheck.unavailable = not have_re and tostring(re) or nil

-- FormatCheck(pattern?): `pattern` is a PCRE pattern whose match means a
-- well-formed reply. Raises when ludo.re is missing or the pattern is bad.
function FormatCheck:init(pattern)
  if not have_re then
    error("FormatCheck needs ludo.re, the ludo runtime's PCRE2 binding, "
      .. "which is not available here (run it inside ludo, or build the C "
      .. "modules and put build/cmod on LUA_CPATH)", 3)
  end
  pattern = pattern or FormatCheck.PATTERN
  if type(pattern) ~= "string" then
    error("FormatCheck: pattern must be a string, got " .. type(pattern), 3)
  end
  local s, err = re.find("", pattern)
  if s == nil and type(err) == "string" then
    error("FormatCheck: bad pattern: " .. err, 3)
  end
  self.pattern = pattern
end

function FormatCheck:forward(action)
  local text = action
  if type(action) == "table" then text = action.text end
  if type(text) ~= "string" then return 0.0 end
  local s, e = re.find(text, self.pattern)
  if s ~= nil then return 1.0 end
  if type(e) == "string" then
    -- A runtime regex failure (e.g. a match limit): say so, do not guess.
    error("FormatCheck: " .. e, 2)
  end
  if re.find(text, "<answer>.*?</answer>") then return 0.25 end
  return 0.0
end

-- Adds the pattern to the base state.
function FormatCheck:state_dict()
  local s = FormatCheck.super.state_dict(self)
  s.pattern = self.pattern
  return s
end

local function main()
  if not have_re then
    print("format_check: skipped: ludo.re is not available in this Lua ("
      .. tostring(re):match("^[^\n]*") .. ")")
    print("format_check: run it inside ludo, or build the C modules "
      .. "(make) and set LUA_CPATH='build/cmod/?.so;;'")
    return
  end
  local r = FormatCheck()
  local replies = {
    "<think>2 + 2 is 4</think>\n<answer>4</answer>",
    "  <think>\nmulti\nline\n</think> <answer>42</answer>  ",
    "<answer>4</answer> because I said so",
    "The answer is 4.",
    { text = "<think>ok</think><answer>yes</answer>" },
  }
  for i, reply in ipairs(replies) do
    local text = type(reply) == "table" and reply.text or reply
    local shown = text:sub(1, 40):gsub("\n", "\\n")
    print(("format_check[%d] score=%.2f  %s"):format(i, r(reply, {}),
      shown))
  end
end

-- Run as a script (not required): score the samples.
if debug and not pcall(debug.getlocal, 4, 1) then main() end

return FormatCheck
