-- ludo.jsontext: a small deterministic JSON encoder in pure Lua.
--
-- It renders Lua values as JSON text, for prompts (LLMJudge) and messages;
-- it has no decoder (the C module ludo.json decodes, runtime/script/json.c).
-- Output is compact and deterministic:
--   * nil and ludo.null encode as null; booleans as true/false;
--   * integers as "%d" (1), floats in the shortest form that reads back to
--     the same value, always looking like a float (1.0, 0.1, 1e+20);
--     NaN and +-inf (not representable in JSON) encode as null;
--   * strings are escaped per RFC 8259 (", \, and U+0000..U+001F); other
--     bytes pass through unchanged, so UTF-8 text stays UTF-8;
--   * a table whose keys are exactly 1..n is an array; any other non-empty
--     table is an object with its keys sorted (integer keys are written as
--     decimal strings and sort by that text); an empty table is `{}` unless
--     its metatable has `__jsontype = "array"` or is ludo.json's array
--     metatable (`__name` "ludo.json.array", which every array decoded by
--     ludo.json carries, so `{"a":[]}` stays `{"a":[]}`). A metatable
--     `__jsontype` of "array" or "object" forces the kind (M.array/M.object
--     set it);
--   * cycles, functions, userdata, threads and keys that are neither
--     strings nor numbers raise an error naming the path ("$.a[2].b").
local null = require("ludo.null")

local M = {}

local type, tostring, tonumber, error = type, tostring, tonumber, error
local pairs, getmetatable, setmetatable = pairs, getmetatable, setmetatable
local rawget = rawget
local format, gsub, find, match =
  string.format, string.gsub, string.find, string.match
local mtype, huge = math.type, math.huge
local sort, concat = table.sort, table.concat

-- The deepest nesting accepted; deeper values are almost surely cycles
-- through distinct tables or runaway data.
M.MAX_DEPTH = 1000

local ESCAPES = {
  ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f",
  ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t",
}
for c = 0, 31 do
  local ch = string.char(c)
  if ESCAPES[ch] == nil then ESCAPES[ch] = format("\\u%04x", c) end
end

-- Returns `s` as a JSON string literal (quotes included).
function M.quote(s)
  if find(s, '[%c"\\]') then
    s = gsub(s, '[\0-\31"\\]', ESCAPES)
  end
  return '"' .. s .. '"'
end
local quote = M.quote

-- Returns the text of number `x` in the encoder's form: "%d" for integers;
-- for floats the shortest of %.15g/%.16g/%.17g that reads back exactly,
-- with ".0" added when it would otherwise look like an integer (this is
-- Python's repr for common values: 0.1, 1.0, 1e+20). NaN gives "nan" and
-- infinities "inf"/"-inf" (callers encoding JSON map those to null).
function M.number(x)
  if mtype(x) == "integer" then return format("%d", x) end
  if x ~= x then return "nan" end
  if x == huge then return "inf" end
  if x == -huge then return "-inf" end
  local s = format("%.15g", x)
  if tonumber(s) ~= x then
    s = format("%.16g", x)
    if tonumber(s) ~= x then s = format("%.17g", x) end
  end
  if not find(s, "[%.eEn]") then s = s .. ".0" end
  return s
end
local number_text = M.number

local ARRAY_MT = { __jsontype = "array" }
local OBJECT_MT = { __jsontype = "object" }

-- The kind a metatable forces ("array", "object"), or nil. ludo.json's
-- array metatable is recognised by its __name, so this module needs no C.
local function forced_kind(mt)
  -- ludo.json's array metatable is protected: getmetatable gives its name.
  if mt == "ludo.json.array" then return "array" end
  if type(mt) ~= "table" then return nil end
  local kind = mt.__jsontype
  if kind == nil and rawget(mt, "__name") == "ludo.json.array" then
    kind = "array"
  end
  return kind
end

-- Marks table `t` (default a new one) to encode as an array, even when
-- empty. Returns `t`. It sets the metatable, so use it on plain tables.
function M.array(t)
  return setmetatable(t or {}, ARRAY_MT)
end

-- Marks table `t` (default a new one) to encode as an object.
function M.object(t)
  return setmetatable(t or {}, OBJECT_MT)
end

local function path_key(path, k)
  -- Extends a path string with key `k` for error messages.
  if type(k) == "string" and match(k, "^[%a_][%w_]*$") then
    return path .. "." .. k
  elseif type(k) == "string" then
    return path .. "[" .. quote(k) .. "]"
  end
  return path .. "[" .. tostring(k) .. "]"
end

local function key_text(k, path)
  -- Returns object key `k` as a string, or raises.
  local tk = type(k)
  if tk == "string" then return k end
  if tk == "number" then
    if mtype(k) == "integer" then return format("%d", k) end
    return number_text(k)
  end
  error(format("jsontext.encode: cannot encode a %s key at %s", tk, path), 0)
end

local encode_value

local function encode_table(t, buf, n, path, visiting, depth)
  -- Appends table `t` to `buf` (length n); returns the new length.
  if visiting[t] then
    error("jsontext.encode: cycle at " .. path, 0)
  end
  if depth > M.MAX_DEPTH then
    error("jsontext.encode: nesting deeper than " .. M.MAX_DEPTH .. " at "
      .. path, 0)
  end
  visiting[t] = true
  local kind = forced_kind(getmetatable(t))
  -- Counts keys and checks for a 1..count sequence.
  local count, is_seq, max = 0, true, 0
  for k in pairs(t) do
    count = count + 1
    if is_seq then
      if mtype(k) ~= "integer" or k < 1 then
        is_seq = false
      elseif k > max then
        max = k
      end
    end
  end
  if max ~= count then is_seq = false end
  if kind == nil then
    kind = (count > 0 and is_seq) and "array" or "object"
  end
  if kind == "array" then
    if count > 0 and not is_seq then
      error("jsontext.encode: table marked as array has non-sequence keys at "
        .. path, 0)
    end
    n = n + 1; buf[n] = "["
    for i = 1, count do
      if i > 1 then n = n + 1; buf[n] = "," end
      n = encode_value(t[i], buf, n, path .. "[" .. i .. "]", visiting,
        depth + 1)
    end
    n = n + 1; buf[n] = "]"
  else
    local keys, texts = {}, {}
    for k in pairs(t) do
      local kt = key_text(k, path)
      keys[#keys + 1] = kt
      texts[kt] = k
    end
    sort(keys)
    n = n + 1; buf[n] = "{"
    for i = 1, #keys do
      local kt = keys[i]
      if kt == keys[i - 1] then
        error(format("jsontext.encode: two keys both written %s at %s",
          quote(kt), path), 0)
      end
      if i > 1 then n = n + 1; buf[n] = "," end
      n = n + 1; buf[n] = quote(kt)
      n = n + 1; buf[n] = ":"
      local k = texts[kt]
      n = encode_value(t[k], buf, n, path_key(path, k), visiting, depth + 1)
    end
    n = n + 1; buf[n] = "}"
  end
  visiting[t] = nil
  return n
end

encode_value = function(v, buf, n, path, visiting, depth)
  local tv = type(v)
  local s
  if tv == "string" then
    s = quote(v)
  elseif tv == "number" then
    if mtype(v) == "integer" then
      s = format("%d", v)
    elseif v ~= v or v == huge or v == -huge then
      s = "null"
    else
      s = number_text(v)
    end
  elseif tv == "boolean" then
    s = v and "true" or "false"
  elseif v == nil or v == null then
    s = "null"
  elseif tv == "table" then
    return encode_table(v, buf, n, path, visiting, depth)
  else
    error(format("jsontext.encode: cannot encode a %s at %s", tv, path), 0)
  end
  n = n + 1
  buf[n] = s
  return n
end

-- Returns the JSON text of `value`. Raises (level 2) on values JSON cannot
-- hold, naming the path: "jsontext.encode: cannot encode a function at $.f".
function M.encode(value)
  local buf = {}
  local ok, res = pcall(encode_value, value, buf, 0, "$", {}, 0)
  if not ok then error(res, 2) end
  return concat(buf, "", 1, res)
end

-- Same as encode, but reports failures the runtime way:
-- returns nil, "EJSON: message" instead of raising.
function M.try_encode(value)
  local buf = {}
  local ok, res = pcall(encode_value, value, buf, 0, "$", {}, 0)
  if not ok then return nil, "EJSON: " .. tostring(res), "EJSON" end
  return concat(buf, "", 1, res)
end

return M
