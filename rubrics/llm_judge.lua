-- rubrics.llm_judge: LLMJudge, a score read from a language model's answer.
--
--   local LLMJudge = require("rubrics.llm_judge")
--   local judge = LLMJudge{
--     prompt_template = "Rate 0-10 how well {action} answers "
--       .. "{observation}. Reply with the number only.",
--     client = client,          -- client:complete(prompt, opts) -> text
                              -- (or llm = {...}, below)
--     default_score = 0.0,      -- when no number is found
--     normalize = true,         -- clamp to [0, 1]
--   }
--
-- The prompt is the template with `{action}` and `{observation}` replaced:
-- tables are rendered as JSON (ludo.jsontext: sorted keys, deterministic),
-- strings as-is, other values with tostring. `{{` and `}}` stand for
-- literal braces (as in Python's str.format, so OpenEnv templates work);
-- any other `{...}` is left as it is. The client is a table or userdata
-- with complete(self, prompt, opts), or a function(prompt, opts); `opts`
-- is the judge's `client_opts` (nil by default). It returns the text; it
-- may wait for it inside with require("ludo.async").await(op), which is
-- why LLMJudge is marked async (WeightedSum then runs judges concurrently).
-- A client returning nil, err (the ludo runtime-failure convention) makes
-- the call raise "LLMJudge: the client failed: err": a silent default
-- would hide outages from training.
--
-- LLM clients (docs/llm.md): a ludo.llm client is such a client, e.g.
--   client = require("ludo.llm").client{api = "openai", base_url = ...,
--                                       model = ..., temperature = 0}
-- and `llm = {api = ..., base_url = ..., model = ..., ...}` (the options
-- of ludo.llm.client) builds one, in place of `client`. Its complete()
-- yields the session's coroutine while the request runs, so the judge
-- does not block other sessions, and the judges of one WeightedSum send
-- their requests at once. Inside ludo, require("ludo.llm") works only
-- where the host allows it (ludo_options_t.lua_llm with
-- LUDO_LUA_LLM_SESSIONS for rubrics; `ludo eval` does).
--
-- Score extraction (ludo differs from OpenEnv, which drops the sign and
-- stops before an exponent): by default the first number with an optional
-- sign, fraction and exponent: "Score: -0.5" -> -0.5, "8/10" -> 8,
-- "1e-3" -> 0.001. `score_pattern` replaces it with a Lua pattern (pure Lua
-- has no PCRE): the first capture if the pattern has captures, else the
-- whole match, read with tonumber. `score_regex` takes a PCRE pattern used
-- through require("ludo.re") (the ludo runtime's pcre2 binding): the first
-- capture, else the whole match; without ludo.re it raises when the judge
-- is built. No match, or text that is not a number, gives default_score.
-- With normalize a score read from the text is clamped to [0, 1]; the
-- default is returned as given (OpenEnv's _parse_score).
-- Scores are floats.
local Rubric = require("ludo.rubric")
local jsontext = require("ludo.jsontext")
local null = require("ludo.null")

local type, error, tostring, tonumber, pcall, getmetatable, pairs =
  type, error, tostring, tonumber, pcall, getmetatable, pairs
local format, find, sub, match = string.format, string.find, string.sub,
  string.match
local concat, pack = table.concat, table.pack

local LLMJudge = Rubric:extend("LLMJudge")

LLMJudge.async = true

local ACTION, OBSERVATION = {}, {}

local function parse_template(tpl)
  -- Splits a template into literal strings and the two field markers.
  local parts, i, n = {}, 1, #tpl
  local lit = {}
  while i <= n do
    local s = find(tpl, "[{}]", i)
    if s == nil then lit[#lit + 1] = sub(tpl, i); break end
    lit[#lit + 1] = sub(tpl, i, s - 1)
    local c = sub(tpl, s, s)
    if sub(tpl, s + 1, s + 1) == c then
      lit[#lit + 1] = c
      i = s + 2
    elseif c == "{" and sub(tpl, s, s + 7) == "{action}" then
      parts[#parts + 1] = concat(lit); lit = {}
      parts[#parts + 1] = ACTION
      i = s + 8
    elseif c == "{" and sub(tpl, s, s + 12) == "{observation}" then
      parts[#parts + 1] = concat(lit); lit = {}
      parts[#parts + 1] = OBSERVATION
      i = s + 13
    else
      lit[#lit + 1] = c
      i = s + 1
    end
  end
  parts[#parts + 1] = concat(lit)
  return parts
end

local function render(v)
  -- The text of a value in a prompt.
  local t = type(v)
  if t == "string" then return v end
  if t == "table" then return jsontext.encode(v) end
  return tostring(v)
end

-- Returns `template` with {action} and {observation} filled in (see the
-- header); usable on its own to preview prompts.
function LLMJudge.format_prompt(template, action, observation)
  local parts = parse_template(template)
  for i = 1, #parts do
    local p = parts[i]
    if p == ACTION then
      parts[i] = render(action)
    elseif p == OBSERVATION then
      parts[i] = render(observation)
    end
  end
  return concat(parts)
end

-- Returns the text of the first signed decimal number in `text` (with an
-- optional exponent), or nil.
function LLMJudge.default_extract(text)
  local s, e = find(text, "[-+]?%d*%.?%d+")
  if s == nil then return nil end
  local _, e2 = find(text, "^[eE][-+]?%d+", e + 1)
  return sub(text, s, e2 or e)
end
local default_extract = LLMJudge.default_extract

local function load_re()
  -- Returns the ludo.re module, or raises a clear error.
  local ok, re = pcall(require, "ludo.re")
  if not ok or type(re) ~= "table" or type(re.find) ~= "function" then
    error("LLMJudge: score_regex needs the ludo.re module (the ludo "
      .. "runtime's PCRE2 binding), which is not available here"
      .. (ok and "" or (": " .. tostring(re)))
      .. "; use score_pattern (a Lua pattern) instead", 0)
  end
  return re
end

local function is_client(c)
  if type(c) == "function" then return true end
  if type(c) ~= "table" and type(c) ~= "userdata" then return false end
  local ok, f = pcall(function() return c.complete end)
  if ok and f ~= nil then return true end
  local mt = getmetatable(c)
  return type(mt) == "table" and mt.__call ~= nil
end

local function class_end(p, i)
  -- Returns the index of the "]" closing the set opened at p[i], or nil.
  local n = #p
  i = i + 1
  if sub(p, i, i) == "^" then i = i + 1 end
  if sub(p, i, i) == "]" then i = i + 1 end -- a leading ] is literal
  while i <= n do
    local c = sub(p, i, i)
    if c == "%" then
      if i == n then return nil end
      i = i + 2
    elseif c == "]" then
      return i
    else
      i = i + 1
    end
  end
  return nil
end

-- Returns nil when `p` is a well-formed Lua pattern, else a reason. The
-- matcher only reports syntax errors on the paths it explores, so this
-- checks the whole pattern up front.
function LLMJudge.pattern_error(p)
  local n, i, open, closed, count = #p, 1, {}, {}, 0
  while i <= n do
    local c = sub(p, i, i)
    if c == "%" then
      if i == n then return "pattern ends with '%'" end
      local d = sub(p, i + 1, i + 1)
      if d == "b" then
        if i + 3 > n then return "missing arguments to '%b'" end
        i = i + 4
      elseif d == "f" then
        if sub(p, i + 2, i + 2) ~= "[" then
          return "missing '[' after '%f' in pattern"
        end
        local e = class_end(p, i + 2)
        if e == nil then return "malformed pattern (missing ']')" end
        i = e + 1
      elseif find(d, "%d") then
        local k = tonumber(d)
        if k == 0 or not closed[k] then
          return "invalid capture index %" .. d
        end
        i = i + 2
      else
        i = i + 2
      end
    elseif c == "[" then
      local e = class_end(p, i)
      if e == nil then return "malformed pattern (missing ']')" end
      i = e + 1
    elseif c == "(" then
      count = count + 1
      if count > 32 then return "too many captures" end
      open[#open + 1] = count
      i = i + 1
    elseif c == ")" then
      if #open == 0 then return "invalid pattern capture" end
      closed[open[#open]] = true
      open[#open] = nil
      i = i + 1
    else
      i = i + 1
    end
  end
  if #open > 0 then return "unfinished capture" end
  return nil
end

local function check_pattern(p, level)
  if p == nil or p == null then return nil end
  if type(p) ~= "string" then
    error("LLMJudge: score_pattern must be a string (a Lua pattern), got "
      .. type(p), level + 1)
  end
  local ok, err = pcall(find, "", p)
  if ok then
    err = LLMJudge.pattern_error(p)
    ok = err == nil
  end
  if not ok then
    error(format("LLMJudge: bad score_pattern %q: %s", p, tostring(err)),
      level + 1)
  end
  return p
end

local function check_regex(p, level)
  if p == nil or p == null then return nil end
  if type(p) ~= "string" then
    error("LLMJudge: score_regex must be a string (a PCRE pattern), got "
      .. type(p), level + 1)
  end
  local ok, re = pcall(load_re)
  if not ok then error(re, level + 1) end
  local s, err = re.find("", p)
  if s == nil and type(err) == "string" then
    error(format("LLMJudge: bad score_regex %q: %s", p, err), level + 1)
  end
  return p, re
end

local OPTIONS = {
  prompt_template = true, client = true, score_pattern = true,
  score_regex = true, default_score = true, normalize = true,
  client_opts = true, llm = true,
}

-- The client of options `o`: o.client, or a ludo.llm client built from
-- o.llm.
local function client_of(o)
  if o.llm == nil then return o.client end
  if o.client ~= nil then
    error("LLMJudge: give client or llm, not both", 4)
  end
  if type(o.llm) ~= "table" then
    error("LLMJudge: llm must be a table of ludo.llm.client options, got "
      .. type(o.llm), 4)
  end
  return require("ludo.llm").client(o.llm)
end

-- LLMJudge{prompt_template = ..., client = ..., score_pattern = nil,
-- score_regex = nil, default_score = 0.0, normalize = true,
-- client_opts = nil, llm = nil}, or LLMJudge(prompt_template, client,
-- options).
function LLMJudge:init(a, b, c)
  local o = a
  if type(a) == "string" then
    o = {}
    if c ~= nil then
      if type(c) ~= "table" then
        error("LLMJudge: the third argument must be an options table", 3)
      end
      for k, v in pairs(c) do o[k] = v end
    end
    o.prompt_template, o.client = a, b
  elseif type(a) ~= "table" then
    error("LLMJudge: expected an options table or (prompt_template, "
      .. "client, options)", 3)
  end
  for k in pairs(o) do
    if not OPTIONS[k] then
      error(format("LLMJudge: unknown option %q", tostring(k)), 3)
    end
  end
  if type(o.prompt_template) ~= "string" then
    error("LLMJudge: prompt_template must be a string, got "
      .. type(o.prompt_template), 3)
  end
  local client = client_of(o)
  if not is_client(client) then
    error("LLMJudge: client must have a complete(prompt, opts) method or "
      .. "be a function, got " .. type(client), 3)
  end
  local d = o.default_score
  if d == nil then d = 0.0 end
  if type(d) ~= "number" then
    error("LLMJudge: default_score must be a number, got " .. type(d), 3)
  end
  local norm = o.normalize
  if norm == nil then norm = true end
  if type(norm) ~= "boolean" then
    error("LLMJudge: normalize must be a boolean, got " .. type(norm), 3)
  end
  if o.client_opts ~= nil and type(o.client_opts) ~= "table" then
    error("LLMJudge: client_opts must be a table", 3)
  end
  if o.score_pattern ~= nil and o.score_regex ~= nil then
    error("LLMJudge: give score_pattern or score_regex, not both", 3)
  end
  self.prompt_template = o.prompt_template
  self.client = client
  self.client_opts = o.client_opts
  self.default_score = d
  self.normalize = norm
  self.score_pattern = check_pattern(o.score_pattern, 3)
  self.score_regex, self._lj_re = check_regex(o.score_regex, 3)
end

-- Returns the prompt for (action, observation).
function LLMJudge:prompt(action, observation)
  local tpl = self.prompt_template
  local parts = self._lj_parts
  if parts == nil or self._lj_src ~= tpl then
    parts = parse_template(tpl)
    self._lj_parts, self._lj_src = parts, tpl
  end
  local buf = {}
  for i = 1, #parts do
    local p = parts[i]
    if p == ACTION then
      buf[i] = render(action)
    elseif p == OBSERVATION then
      buf[i] = render(observation)
    else
      buf[i] = p
    end
  end
  return concat(buf)
end

-- Returns the score read from the model's `text` (see the header).
function LLMJudge:parse_score(text)
  local num
  if self.score_regex ~= nil then
    local re = self._lj_re or load_re()
    local r = pack(re.find(text, self.score_regex))
    if r[1] == nil then
      if type(r[2]) == "string" then
        error("LLMJudge: score_regex failed: " .. r[2], 2)
      end
    else
      local cap = r[3]
      if r.n < 3 then cap = sub(text, r[1], r[2]) end
      if type(cap) == "string" then num = tonumber(cap) end
    end
  elseif self.score_pattern ~= nil then
    local cap = match(text, self.score_pattern)
    if type(cap) == "string" then num = tonumber(cap) end
  else
    local s = default_extract(text)
    if s ~= nil then num = tonumber(s) end
  end
  if num == nil then return self.default_score + 0.0 end -- as is (OpenEnv)
  num = num + 0.0
  if self.normalize then
    if num < 0.0 then
      num = 0.0
    elseif num > 1.0 then
      num = 1.0
    end
  end
  return num
end

function LLMJudge:forward(action, observation)
  local prompt = self:prompt(action, observation)
  local client = self.client
  local text, err
  if type(client) == "function" then
    text, err = client(prompt, self.client_opts)
  else
    text, err = client:complete(prompt, self.client_opts)
  end
  if type(text) ~= "string" then
    if text == nil then
      error("LLMJudge: the client failed: " .. tostring(err), 0)
    end
    error("LLMJudge: the client must return a string, got " .. type(text),
      0)
  end
  return self:parse_score(text)
end

-- Adds prompt_template, score_pattern, score_regex (ludo.null when unset),
-- default_score and normalize; the client is not part of the state.
function LLMJudge:state_dict()
  local s = LLMJudge.super.state_dict(self)
  s.prompt_template = self.prompt_template
  s.score_pattern = self.score_pattern or null
  s.score_regex = self.score_regex or null
  s.default_score = self.default_score
  s.normalize = self.normalize
  return s
end

-- Partial update: keys that are absent stay; score_pattern/score_regex
-- set to ludo.null return to the default extraction.
function LLMJudge:load_state_dict(state)
  if type(state) ~= "table" then
    error("LLMJudge: load_state_dict expects a table, got " .. type(state), 2)
  end
  local tpl, d, norm = state.prompt_template, state.default_score,
    state.normalize
  if tpl ~= nil and type(tpl) ~= "string" then
    error("LLMJudge: load_state_dict: prompt_template must be a string", 2)
  end
  if d ~= nil and type(d) ~= "number" then
    error("LLMJudge: load_state_dict: default_score must be a number", 2)
  end
  if norm ~= nil and type(norm) ~= "boolean" then
    error("LLMJudge: load_state_dict: normalize must be a boolean", 2)
  end
  local pat, rx, re = self.score_pattern, self.score_regex, self._lj_re
  if state.score_pattern ~= nil then
    pat = check_pattern(state.score_pattern, 2)
  end
  if state.score_regex ~= nil then
    rx, re = check_regex(state.score_regex, 2)
  end
  if pat ~= nil and rx ~= nil then
    error("LLMJudge: load_state_dict: score_pattern and score_regex are "
      .. "both set; set one of them to ludo.null", 2)
  end
  LLMJudge.super.load_state_dict(self, state)
  if tpl ~= nil then self.prompt_template = tpl end
  if d ~= nil then self.default_score = d end
  if norm ~= nil then self.normalize = norm end
  self.score_pattern, self.score_regex, self._lj_re = pat, rx, re
end

return LLMJudge
