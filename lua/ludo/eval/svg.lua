-- ludo.eval.svg: the charts of the evaluation report as inline SVG text:
-- a histogram, horizontal bars with confidence whiskers, and points with a
-- line. Each chart has axes with "nice" ticks and labels, a <title> per
-- mark (the browser's tooltip), and data-* attributes saying how many
-- marks it drew (the report's browser test counts them). Styling is by
-- class (the page's CSS), so the SVG stays small.
local H = require("ludo.eval.html")

local M = {}

local format, concat, floor, log, abs, max, min =
  string.format, table.concat, math.floor, math.log, math.abs, math.max,
  math.min
local esc = H.escape

-- Coordinates are written with one decimal.
local function c(x) return format("%.1f", x) end

-- Returns increasing "nice" tick values (1, 2 or 5 times a power of ten
-- apart) covering [lo, hi] with about `target` ticks, the first <= lo and
-- the last >= hi, and the step. With `integer`, the step is at least 1
-- (axes of counts).
function M.ticks(lo, hi, target, integer)
  target = target or 5
  if hi < lo then lo, hi = hi, lo end
  -- A range below the precision of the values (rounding noise of a
  -- running mean of equal values) is one value.
  if hi - lo <= 1e-9 * max(abs(lo), abs(hi)) then
    local mid = (lo + hi) / 2
    lo, hi = mid, mid
  end
  if hi == lo then
    local pad = lo == 0 and 1 or abs(lo) * 0.1
    lo, hi = lo - pad, hi + pad
  end
  local raw = (hi - lo) / target
  local p = 10 ^ floor(log(raw, 10))
  local step
  for _, m in ipairs({ 1, 2, 5, 10 }) do
    step = m * p
    if step >= raw then break end
  end
  if integer and step < 1 then step = 1 end
  local first = floor(lo / step + 1e-9) * step
  local out = {}
  local i = 0
  repeat
    local v = first + i * step
    if abs(v) < step * 1e-9 then v = 0.0 end
    out[#out + 1] = v
    i = i + 1
  until v >= hi - step * 1e-9 or i > 100
  return out, step
end

-- Formats tick value `v` with the decimals that step `step` needs; huge
-- or tiny values in the short exponent form ("-1.8e300", "2e-5": no "+"
-- nor leading zeros), so a label fits the chart's margin.
local function tick_text(v, step)
  if abs(v) >= 1e6 or (step < 1e-4 and v ~= 0) then
    return (format("%.3g", v):gsub("e%+?(%-?)0*(%d)", "e%1%2"))
  end
  local d = max(0, -floor(log(step, 10) + 1e-9))
  return format("%." .. d .. "f", v)
end
M.tick_text = tick_text

-- The left margin of a chart whose y labels are the ticks `yt` (step
-- `ys`): room for the longest label (12 px text, ~7 px a character) and
-- the rotated axis label, at least `min_left`.
local function left_margin(yt, ys, min_left)
  local longest = 0
  for _, v in ipairs(yt) do longest = max(longest, #tick_text(v, ys)) end
  return max(min_left, 30 + 7 * longest)
end

-- A linear map of [d0, d1] onto [r0, r1].
local function scale(d0, d1, r0, r1)
  local k = (d1 == d0) and 0 or (r1 - r0) / (d1 - d0)
  return function(v) return r0 + (v - d0) * k end
end

-- The frame of a chart: the opening tag, the plot's grid lines, axes,
-- ticks and labels. `o` = {id, width, height, left, right, top, bottom,
-- x = {ticks, step, label}, y = {ticks, step, label}, sx, sy, marks =
-- {name = count}, title}. Returns the parts list (the caller appends its
-- marks, then "</svg>").
local function frame(o)
  local w, h = o.width, o.height
  local parts = {}
  local data = {}
  for name, n in pairs(o.marks or {}) do
    data[#data + 1] = format(' data-%s="%d"', name, n)
  end
  table.sort(data)
  parts[1] = format('<svg class="chart" id="%s" viewBox="0 0 %d %d" '
    .. 'width="%d" height="%d" role="img" aria-label="%s"%s>',
    esc(o.id), w, h, w, h, esc(o.title or o.id), concat(data))
  parts[#parts + 1] = "<title>" .. esc(o.title or o.id) .. "</title>"
  local x0, x1 = o.left, w - o.right
  local y0, y1 = h - o.bottom, o.top
  -- The y grid and labels.
  if o.y and o.y.ticks then
    for _, v in ipairs(o.y.ticks) do
      local y = o.sy(v)
      parts[#parts + 1] = format('<line class="grid" x1="%s" x2="%s" '
        .. 'y1="%s" y2="%s"/><text class="tick" x="%s" y="%s" '
        .. 'text-anchor="end">%s</text>', c(x0), c(x1), c(y), c(y),
        c(x0 - 6), c(y + 4), esc(tick_text(v, o.y.step)))
    end
  end
  if o.x and o.x.ticks then
    for _, v in ipairs(o.x.ticks) do
      local x = o.sx(v)
      parts[#parts + 1] = format('<line class="tickmark" x1="%s" x2="%s" '
        .. 'y1="%s" y2="%s"/><text class="tick" x="%s" y="%s" '
        .. 'text-anchor="middle">%s</text>', c(x), c(x), c(y0),
        c(y0 + 5), c(x), c(y0 + 18), esc(tick_text(v, o.x.step)))
    end
  end
  parts[#parts + 1] = format('<line class="axis" x1="%s" x2="%s" y1="%s" '
    .. 'y2="%s"/><line class="axis" x1="%s" x2="%s" y1="%s" y2="%s"/>',
    c(x0), c(x1), c(y0), c(y0), c(x0), c(x0), c(y0), c(y1))
  if o.x and o.x.label then
    parts[#parts + 1] = format('<text class="label" x="%s" y="%s" '
      .. 'text-anchor="middle">%s</text>', c((x0 + x1) / 2), c(h - 6),
      esc(o.x.label))
  end
  if o.y and o.y.label then
    parts[#parts + 1] = format('<text class="label" transform="translate('
      .. '%s %s) rotate(-90)" text-anchor="middle">%s</text>', c(14),
      c((y0 + y1) / 2), esc(o.y.label))
  end
  return parts
end

-- A note ("no data" unless `text`) in the middle of an empty chart's
-- plot area (x from `x0` to `x1`, y at `y`).
local function empty_note(parts, x0, x1, y, text)
  parts[#parts + 1] = format('<text class="empty" x="%s" y="%s" '
    .. 'text-anchor="middle">%s</text>', c((x0 + x1) / 2), c(y),
    esc(text or "no data"))
end

-- A histogram. `o` = {id, title, edges (k+1), counts (k), xlabel, ylabel,
-- width, height, integer (bins are integers: label the bars by value)}.
-- One <rect class="bar" data-count=N> per bin, zero-height bins included;
-- the svg's data-bars is k.
function M.histogram(o)
  local w, h = o.width or 560, o.height or 300
  local k = #o.counts
  local maxc = 0
  for i = 1, k do maxc = max(maxc, o.counts[i]) end
  local yt, ys = M.ticks(0, max(maxc, 1), 5, true)
  local R, T, B = 16, 14, 42
  local L = left_margin(yt, ys, 56)
  local xt, xs, sx
  if k > 0 then
    local lo, hi = o.edges[1], o.edges[k + 1]
    if o.integer then
      xt, xs = M.ticks(lo + 0.5, hi - 0.5, min(k, 8), true)
    elseif k == 1 then
      -- one bin (equal values): room on both sides, so the bar reads as
      -- one value rather than a range
      local bw = hi - lo
      xt, xs = M.ticks(lo - 2 * bw, hi + 2 * bw, 6)
    else
      xt, xs = M.ticks(lo, hi, 6)
    end
    -- The axis spans the bins and the ticks.
    sx = scale(min(lo, xt[1]), max(hi, xt[#xt]), L, w - R)
  else
    sx = scale(0, 1, L, w - R)
  end
  local sy = scale(0, yt[#yt], h - B, T)
  local parts = frame({
    id = o.id, title = o.title, width = w, height = h, left = L, right = R,
    top = T, bottom = B, sx = sx, sy = sy, marks = { bars = k },
    x = xt and { ticks = xt, step = xs, label = o.xlabel } or
      { label = o.xlabel },
    y = { ticks = yt, step = ys, label = o.ylabel },
  })
  for i = 1, k do
    local a, b = sx(o.edges[i]), sx(o.edges[i + 1])
    if k == 1 and b - a < (w - R - L) / 5 then
      -- one value (all equal): a bar wide enough to see, at the value,
      -- even where its bin is narrower than a float tells apart (-1e300)
      local mid, half = (a + b) / 2, (w - R - L) / 10
      a, b = mid - half, mid + half
    end
    local y = sy(o.counts[i])
    local range = o.integer
      and format("%s", H.num(floor(o.edges[i] + 0.5)))
      or format("[%s, %s)", H.num(o.edges[i]), H.num(o.edges[i + 1]))
    parts[#parts + 1] = format('<rect class="bar" data-count="%d" x="%s" '
      .. 'y="%s" width="%s" height="%s"><title>%s: %d</title></rect>',
      o.counts[i], c(a + 0.5), c(y), c(max(b - a - 1, 0.5)),
      c(h - B - y), esc(range), o.counts[i])
  end
  if k == 0 then empty_note(parts, L, w - R, (T + h - B) / 2) end
  parts[#parts + 1] = "</svg>"
  return concat(parts)
end

-- Horizontal bars, one row per item, from 0 to the value, with an
-- optional whisker from lo to hi. `o` = {id, title, items = {{label,
-- value, lo, hi, tip}}, xlabel, width, label_width, integer (values are
-- counts), empty (the note when there are no items)}. Draws <rect
-- class="bar"> per item and <line class="whisker"> per item with lo/hi;
-- data-bars and data-whiskers count them.
function M.hbars(o)
  local n = #o.items
  local row = 26
  local L = o.label_width or 240
  local R, T, B = 24, 10, 42
  local w = o.width or 1120
  local h = T + B + max(n, 2) * row
  local lo, hi, whiskers = 0.0, 0.0, 0
  for _, it in ipairs(o.items) do
    lo, hi = min(lo, it.value), max(hi, it.value)
    if it.lo and it.hi then
      lo, hi = min(lo, it.lo), max(hi, it.hi)
      whiskers = whiskers + 1
    end
  end
  if hi == lo then hi = lo + 1 end
  local xt, xs = M.ticks(lo, hi, 8, o.integer)
  local sx = scale(xt[1], xt[#xt], L, w - R)
  local parts = frame({
    id = o.id, title = o.title, width = w, height = h, left = L, right = R,
    top = T, bottom = B, sx = sx, sy = function(v) return v end,
    marks = { bars = n, whiskers = whiskers },
    x = { ticks = xt, step = xs, label = o.xlabel },
  })
  -- Vertical grid lines at the x ticks, and the zero line.
  for _, v in ipairs(xt) do
    parts[#parts + 1] = format('<line class="grid" x1="%s" x2="%s" '
      .. 'y1="%s" y2="%s"/>', c(sx(v)), c(sx(v)), c(T), c(h - B))
  end
  for i, it in ipairs(o.items) do
    local y = T + (i - 1) * row
    local a, b = sx(0), sx(it.value)
    if b < a then a, b = b, a end
    local label = it.label
    if #label > 36 then label = label:sub(1, 16) .. "\u{2026}"
      .. label:sub(-18) end
    parts[#parts + 1] = format('<text class="rowlabel" x="%s" y="%s" '
      .. 'text-anchor="end">%s<title>%s</title></text>', c(L - 8),
      c(y + row / 2 + 4), esc(label), esc(it.label))
    parts[#parts + 1] = format('<rect class="bar" x="%s" y="%s" '
      .. 'width="%s" height="%s"><title>%s</title></rect>', c(a), c(y + 5),
      c(max(b - a, 1)), c(row - 10), esc(it.tip or it.label))
    if it.lo and it.hi then
      local ym = y + row / 2
      parts[#parts + 1] = format('<path class="whisker" d="M%s %sH%sM%s '
        .. '%sV%sM%s %sV%s"/>', c(sx(it.lo)), c(ym), c(sx(it.hi)),
        c(sx(it.lo)), c(ym - 6), c(ym + 6), c(sx(it.hi)), c(ym - 6),
        c(ym + 6))
    end
  end
  parts[#parts + 1] = format('<line class="axis" x1="%s" x2="%s" y1="%s" '
    .. 'y2="%s"/>', c(sx(0)), c(sx(0)), c(T), c(h - B))
  if n == 0 then empty_note(parts, L, w - R, T + row + 5, o.empty) end
  parts[#parts + 1] = "</svg>"
  return concat(parts)
end

-- Points and a line over a numeric x axis. `o` = {id, title, points =
-- {{x, y, tip}}, line = {{x, y}}, xlabel, ylabel, width, height,
-- line_label, integer_x}. Draws <circle class="point"> per point and one
-- <path class="line"> (data-points, data-lines).
function M.series(o)
  local w, h = o.width or 1120, o.height or 320
  local R, T, B = 16, 14, 42
  local pts, line = o.points, o.line or {}
  local xlo, xhi, ylo, yhi = math.huge, -math.huge, math.huge, -math.huge
  for _, set in ipairs({ pts, line }) do
    for _, p in ipairs(set) do
      xlo, xhi = min(xlo, p[1]), max(xhi, p[1])
      ylo, yhi = min(ylo, p[2]), max(yhi, p[2])
    end
  end
  if xlo > xhi then xlo, xhi, ylo, yhi = 0, 1, 0, 1 end
  local xt, xs = M.ticks(xlo, xhi, 10, o.integer_x)
  local yt, ys = M.ticks(ylo, yhi, 5)
  local L = left_margin(yt, ys, 56)
  local sx = scale(xt[1], xt[#xt], L + 6, w - R - 6)
  local sy = scale(yt[1], yt[#yt], h - B, T)
  local parts = frame({
    id = o.id, title = o.title, width = w, height = h, left = L, right = R,
    top = T, bottom = B, sx = sx, sy = sy,
    marks = { points = #pts, lines = #line > 0 and 1 or 0 },
    x = { ticks = xt, step = xs, label = o.xlabel },
    y = { ticks = yt, step = ys, label = o.ylabel },
  })
  for _, p in ipairs(pts) do
    parts[#parts + 1] = format('<circle class="point" cx="%s" cy="%s" '
      .. 'r="%s">%s</circle>', c(sx(p[1])), c(sy(p[2])),
      #pts > 400 and "1.6" or "3",
      p[3] and ("<title>" .. esc(p[3]) .. "</title>") or "")
  end
  if #line > 0 then
    local d = {}
    for i, p in ipairs(line) do
      d[i] = (i == 1 and "M" or "L") .. c(sx(p[1])) .. " " .. c(sy(p[2]))
    end
    parts[#parts + 1] = '<path class="line" d="' .. concat(d) .. '"><title>'
      .. esc(o.line_label or "line") .. "</title></path>"
  end
  if #pts == 0 and #line == 0 then
    empty_note(parts, L, w - R, (T + h - B) / 2)
  end
  parts[#parts + 1] = "</svg>"
  return concat(parts)
end

return M
