-- ludo.schema: JSON Schema for environment declarations.
--
-- Environments declare action/observation/state schemas either as JSON
-- Schema tables or in a compact form that expands to JSON Schema:
--
--   action = { message = "string", count = "integer?", tags = "string[]",
--              move = { "up", "down" },            -- enum
--              pos = { x = "number", y = "number" } } -- nested object
--
-- A table is taken as JSON Schema when it has one of the keys type,
-- properties, anyOf, oneOf, allOf, enum, const or $ref; otherwise it is
-- compact. A compact object with a field literally named "type" must be
-- written as JSON Schema or through schema.object{...}. Compact objects
-- forbid unknown fields (additionalProperties = false), like OpenEnv's
-- actions. "?" marks an optional field; "T[]" an array of T; a list of
-- literals an enum.
--
-- schema.compile(s) returns a validator `v(value, path) -> true | false, msg`
-- where msg names the offending field ("action.count: expected integer, got
-- string"). Supported keywords: type, properties, required,
-- additionalProperties, items, enum, const, minimum, maximum,
-- exclusiveMinimum, exclusiveMaximum, minLength, maxLength, minItems,
-- maxItems, anyOf, oneOf, allOf. Others are ignored, as JSON Schema allows.
-- Pure Lua.
local null = require("ludo.null")

local M = {}

local TYPES = {
  string = true, integer = true, number = true, boolean = true,
  object = true, array = true, null = true,
}
local SCHEMA_KEYS = { "type", "properties", "anyOf", "oneOf", "allOf",
  "enum", "const", "$ref" }
local TAG = setmetatable({}, { __name = "ludo.schema.expanded" })
-- schema.object{...}'s note of where null stands for an absent field
-- (M.nulls), or false.
local NULLS = setmetatable({}, { __name = "ludo.schema.nulls" })

local function is_list(t)
  local n = #t
  if n == 0 then return false end
  for k in pairs(t) do
    if math.type(k) ~= "integer" or k < 1 or k > n then return false end
  end
  return true
end

local function is_json_schema(t)
  if rawget(t, TAG) then return true end
  for _, k in ipairs(SCHEMA_KEYS) do
    if t[k] ~= nil then return true end
  end
  return false
end

local expand

-- Expands one compact field spec; returns schema, optional.
local function expand_field(spec, where)
  local ts = type(spec)
  if ts == "string" then
    local optional = false
    if spec:sub(-1) == "?" then
      optional, spec = true, spec:sub(1, -2)
    end
    if spec:sub(-2) == "[]" then
      local item = expand_field(spec:sub(1, -3), where .. "[]")
      return { type = optional and { "array", "null" } or "array",
        items = item }, optional
    end
    if spec == "any" then return {}, optional end
    if not TYPES[spec] then
      error(string.format("schema: %s: unknown type '%s' (use string, "
        .. "integer, number, boolean, object, array, null or any)",
        where, spec), 0)
    end
    -- An optional field takes null as well (typed clients send an unset
    -- Optional field as null); the runner hands it to step as nil.
    if optional and spec ~= "null" then
      return { type = { spec, "null" } }, true
    end
    return { type = spec }, optional
  elseif ts == "table" then
    if is_list(spec) then
      return { enum = spec }, false
    end
    return expand(spec, where), false
  end
  error(string.format("schema: %s: a field is a type name, a list of "
    .. "values or a table, not a %s", where, ts), 0)
end

-- Expands a declaration (compact or JSON Schema) to JSON Schema.
function expand(decl, where)
  where = where or "schema"
  if decl == nil then return { type = "object" } end
  if type(decl) == "string" then return (expand_field(decl, where)) end
  if type(decl) ~= "table" then
    error(string.format("schema: %s must be a table, got %s", where,
      type(decl)), 0)
  end
  if is_json_schema(decl) then return decl end
  local props, required, names = {}, {}, {}
  for k in pairs(decl) do
    if type(k) ~= "string" then
      error(string.format("schema: %s: field names must be strings", where),
        0)
    end
    names[#names + 1] = k
  end
  table.sort(names)
  for _, k in ipairs(names) do
    local s, optional = expand_field(decl[k], where .. "." .. k)
    props[k] = s
    if not optional then required[#required + 1] = k end
  end
  local out = { type = "object", properties = props,
    additionalProperties = false }
  if #required > 0 then out.required = required end
  return out
end
M.expand = expand

-- Where compact fields let null stand for an absent field: {names = the
-- optional fields ("T?"), nested = {field = the same for a compact object
-- field}}, or nil when there is none.
local function nulls_of(fields)
  local names, nested, any = {}, {}, false
  for k, spec in pairs(fields) do
    if type(spec) == "string" and spec:sub(-1) == "?" then
      names[#names + 1], any = k, true
    elseif type(spec) == "table" then
      nested[k] = M.nulls(spec)
      any = any or nested[k] ~= nil
    end
  end
  return any and { names = names, nested = nested } or nil
end

-- The same for a declaration (compact, schema.object{...} or JSON Schema,
-- which has none: its author says where null goes).
function M.nulls(decl)
  if type(decl) ~= "table" then return nil end
  local noted = rawget(decl, NULLS)
  if noted ~= nil then return noted or nil end
  if is_json_schema(decl) or is_list(decl) then return nil end
  return nulls_of(decl)
end

-- Removes the nulls that M.nulls' `n` says stand for absent fields from
-- the checked value t (in place).
function M.drop_nulls(t, n)
  local names = n.names
  for i = 1, #names do
    if t[names[i]] == null then t[names[i]] = nil end
  end
  for k, sub in pairs(n.nested) do
    local v = t[k]
    if type(v) == "table" then M.drop_nulls(v, sub) end
  end
end

-- Builds an object schema from compact fields, even ones named "type".
function M.object(fields)
  local names = {}
  for k in pairs(fields) do names[#names + 1] = k end
  local plain = {}
  for _, k in ipairs(names) do plain[k] = fields[k] end
  -- expand field by field so "type" is not mistaken for a keyword
  local props, required = {}, {}
  table.sort(names)
  for _, k in ipairs(names) do
    local s, optional = expand_field(plain[k], "schema." .. k)
    props[k] = s
    if not optional then required[#required + 1] = k end
  end
  local out = { type = "object", properties = props,
    additionalProperties = false }
  out[TAG] = true
  out[NULLS] = nulls_of(plain) or false
  if #required > 0 then out.required = required end
  return out
end

-- Strips internal tags so the schema can be encoded as JSON.
function M.clean(s)
  if type(s) ~= "table" then return s end
  local out = {}
  for k, v in pairs(s) do
    if k ~= TAG and k ~= NULLS then out[k] = M.clean(v) end
  end
  return setmetatable(out, getmetatable(s) ~= nil
    and getmetatable(s).__name == "ludo.json.array" and getmetatable(s)
    or nil)
end

-- ---- validation --------------------------------------------------------

local function json_type(v)
  local t = type(v)
  if t == "table" then
    if v == null then return "null" end
    local mt = getmetatable(v)
    if mt and mt.__name == "ludo.json.array" then return "array" end
    if next(v) == nil then return "empty" end
    if v[1] ~= nil then return "array" end
    return "object"
  elseif t == "number" then
    return math.type(v) == "integer" and "integer" or "number"
  elseif t == "nil" then
    return "null"
  end
  return t
end

local function type_ok(want, got, v)
  if want == got then return true end
  if got == "empty" then return want == "object" or want == "array" end
  if want == "number" and got == "integer" then return true end
  if want == "integer" and got == "number" then
    return v == math.floor(v) and v == v and v ~= math.huge
      and v ~= -math.huge
  end
  return false
end

local function describe(got)
  return got == "empty" and "empty table" or got
end

local function fmt_path(path, key)
  if math.type(key) == "integer" then
    return string.format("%s[%d]", path, key - 1)
  end
  return path .. "." .. tostring(key)
end

local compile

local function deep_equal(a, b)
  if a == b then return true end
  if type(a) ~= "table" or type(b) ~= "table" then return false end
  for k, v in pairs(a) do
    if not deep_equal(v, b[k]) then return false end
  end
  for k in pairs(b) do
    if a[k] == nil then return false end
  end
  return true
end

-- Compiles a JSON Schema table into a validator closure. Checks are built
-- once, so validating is a few table lookups per field.
function compile(s)
  if s == true or s == nil then return function() return true end end
  if s == false then
    return function(_, path) return false, path .. ": no value allowed" end
  end
  local checks = {}
  local function add(fn) checks[#checks + 1] = fn end

  local t = s.type
  if t ~= nil then
    local wants = type(t) == "table" and t or { t }
    local label = table.concat(wants, " or ")
    add(function(v, path)
      local got = json_type(v)
      for i = 1, #wants do
        if type_ok(wants[i], got, v) then return true end
      end
      return false, string.format("%s: expected %s, got %s", path, label,
        describe(got))
    end)
  end
  if s.enum ~= nil then
    local enum = s.enum
    add(function(v, path)
      for i = 1, #enum do
        if deep_equal(enum[i], v) then return true end
      end
      local shown = {}
      for i = 1, #enum do shown[i] = tostring(enum[i]) end
      return false, string.format("%s: expected one of %s, got %s", path,
        table.concat(shown, ", "), tostring(v))
    end)
  end
  if s.const ~= nil then
    local c = s.const
    add(function(v, path)
      if deep_equal(c, v) then return true end
      return false, string.format("%s: expected %s, got %s", path,
        tostring(c), tostring(v))
    end)
  end
  local function bound(key, cmp, text)
    local lim = s[key]
    if lim == nil then return end
    add(function(v, path)
      if type(v) ~= "number" or cmp(v, lim) then return true end
      return false, string.format("%s: %s %s, got %s", path, text,
        tostring(lim), tostring(v))
    end)
  end
  bound("minimum", function(v, l) return v >= l end, "must be >=")
  bound("maximum", function(v, l) return v <= l end, "must be <=")
  bound("exclusiveMinimum", function(v, l) return v > l end, "must be >")
  bound("exclusiveMaximum", function(v, l) return v < l end, "must be <")
  local function len_bound(key, kind, cmp, text)
    local lim = s[key]
    if lim == nil then return end
    add(function(v, path)
      local n
      if kind == "string" then
        if type(v) ~= "string" then return true end
        n = utf8.len(v) or #v
      else
        if type(v) ~= "table" then return true end
        n = #v
      end
      if cmp(n, lim) then return true end
      return false, string.format("%s: %s %d, got %d", path, text, lim, n)
    end)
  end
  len_bound("minLength", "string", function(n, l) return n >= l end,
    "length must be >=")
  len_bound("maxLength", "string", function(n, l) return n <= l end,
    "length must be <=")
  len_bound("minItems", "array", function(n, l) return n >= l end,
    "item count must be >=")
  len_bound("maxItems", "array", function(n, l) return n <= l end,
    "item count must be <=")

  if s.properties ~= nil or s.required ~= nil
      or s.additionalProperties ~= nil then
    local props = {}
    for k, sub in pairs(s.properties or {}) do props[k] = compile(sub) end
    local required = s.required or {}
    local extra = s.additionalProperties
    local extra_v = type(extra) == "table" and compile(extra) or nil
    add(function(v, path)
      if type(v) ~= "table" or v == null then return true end
      for i = 1, #required do
        if v[required[i]] == nil then
          return false, string.format("%s: missing required field '%s'",
            path, required[i])
        end
      end
      for k, fv in pairs(v) do
        local pv = props[k]
        if pv ~= nil then
          local ok, err = pv(fv, fmt_path(path, k))
          if not ok then return false, err end
        elseif extra == false then
          return false, string.format("%s: unknown field '%s'", path,
            tostring(k))
        elseif extra_v ~= nil then
          local ok, err = extra_v(fv, fmt_path(path, k))
          if not ok then return false, err end
        end
      end
      return true
    end)
  end
  if s.items ~= nil and type(s.items) == "table" then
    local item = compile(s.items)
    add(function(v, path)
      if type(v) ~= "table" or v == null then return true end
      for i = 1, #v do
        local ok, err = item(v[i], fmt_path(path, i))
        if not ok then return false, err end
      end
      return true
    end)
  end
  local function combo(key, need)
    local list = s[key]
    if list == nil then return end
    local vs = {}
    for i = 1, #list do vs[i] = compile(list[i]) end
    add(function(v, path)
      local passed, first = 0, nil
      for i = 1, #vs do
        local ok, err = vs[i](v, path)
        if ok then passed = passed + 1 elseif not first then first = err end
      end
      if need(passed, #vs) then return true end
      return false, string.format("%s: does not match %s (%s)", path, key,
        first or "matched more than one")
    end)
  end
  combo("anyOf", function(p) return p >= 1 end)
  combo("oneOf", function(p) return p == 1 end)
  combo("allOf", function(p, n) return p == n end)

  local n = #checks
  if n == 0 then return function() return true end end
  if n == 1 then return checks[1] end
  return function(v, path)
    for i = 1, n do
      local ok, err = checks[i](v, path)
      if not ok then return false, err end
    end
    return true
  end
end
M.compile = compile

return M
