-- ludo.eval.html: escaping for the evaluation report (HTML text, attribute
-- values, inline SVG) and the check that decides whether a path may be a
-- link.
local M = {}

local gsub, find, format, tostring = string.gsub, string.find,
  string.format, tostring

local ENTITIES = {
  ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;",
  ["'"] = "&#39;",
}
-- C0 controls other than tab, newline and carriage return, and DEL, are
-- not allowed in HTML text: they become U+FFFD.
for c = 0, 31 do
  if c ~= 9 and c ~= 10 and c ~= 13 then
    ENTITIES[string.char(c)] = "&#xFFFD;"
  end
end
ENTITIES["\127"] = "&#xFFFD;"

-- Returns `s` (any value; tostring'ed) safe as HTML text and inside a
-- quoted attribute value, in HTML and in inline SVG alike: & < > " ' are
-- entities, control characters U+FFFD. Bytes >= 0x80 pass unchanged (the
-- page is UTF-8; the JSON the runner decodes is valid UTF-8).
function M.escape(s)
  s = tostring(s)
  if find(s, "[&<>\"'%c\127]") then
    s = gsub(s, "[&<>\"'%c\127]", ENTITIES)
  end
  return s
end

-- True when `p` may be written as a link's href: a relative path made of
-- letters, digits and . _ - / only, not starting with "/" and without a
-- ".." segment, so a hostile record cannot link to javascript:, another
-- host or outside the output folder. Other paths are shown as text.
function M.safe_href(p)
  if type(p) ~= "string" or p == "" then return false end
  if not find(p, "^[%w%._%-/]+$") then return false end
  if find(p, "^/") then return false end
  for seg in string.gmatch(p, "[^/]+") do
    if seg == ".." then return false end
  end
  return true
end

-- Writes the digits of integer text `s` in groups of three ("12,345").
local function grouped(s)
  local sign, digits = s:match("^(%-?)(%d+)$")
  if digits == nil or #digits <= 4 then return s end
  local head = #digits % 3
  local out = head > 0 and { digits:sub(1, head) } or {}
  for i = head + 1, #digits, 3 do out[#out + 1] = digits:sub(i, i + 2) end
  return sign .. table.concat(out, ",")
end

-- Formats number `x` for people: integers as they are, other numbers
-- with `digits` significant digits (default 4), both grouped by
-- thousands from 10,000 on (floats that large are rounded to integers);
-- NaN/inf/nil as an en dash.
function M.num(x, digits)
  if type(x) ~= "number" or x ~= x or x == math.huge or x == -math.huge then
    return "\u{2013}"
  end
  if math.type(x) == "integer" then return grouped(format("%d", x)) end
  if math.abs(x) >= 1e4 and math.abs(x) < 1e15 then
    return grouped(format("%.0f", x))
  end
  local s = format("%." .. (digits or 4) .. "g", x)
  if s == "-0" then s = "0" end
  return s
end

return M
