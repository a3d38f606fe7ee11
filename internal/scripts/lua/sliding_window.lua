{{- define "about" -}}
-- The algorithm: a weighted two-window sliding window. A limit is requests per period; the
-- estimate is prev * (the part of the previous window still inside the sliding window) +
-- curr. Its state is struct '<ddd' (the window number floor(now / period), the count of the
-- window before it, the count in it; below 0 after a grant: units beyond the limit until
-- that window ends, then read as 0): both windows the estimate needs in one key, so one
-- read and one write per limit. A stored window after the current one (a clock that moved
-- backwards, a period raised by an edit) counts wholly in the current window, so no reply
-- reaches past two windows of the current period. A value that is not 24 bytes counts as
-- fresh state, overwritten by the next admission. Limit i's two numbers in ARGV: requests,
-- then the period in µs. The keys' ttl is at least 2 periods: a window is read as the
-- previous one during the whole next window.
{{- end}}

{{- define "limit" -}}
-- One limit, in a loop over them (i): a, b = requests, period.
local requests, period = a, b
local bucket = math.floor(now / period)
local elapsed = now - bucket * period
local prev, curr = 0, 0
local v = vals[i]
if v and #v == 24 then
  local w, p, c = struct.unpack('<ddd', v)
  -- Counts must be below 2^53, the previous window's at least 0 and this one's at least
  -- -2^40 (false for NaN): anything else is not ours. Below 0 is a grant: units beyond the
  -- limit in its window, which end with it (as the previous window it counts 0).
  if p >= 0 and c >= -1099511627776 and p + c < 9007199254740992 then
    if w == bucket then
      prev, curr = p, c
    elseif w == bucket - 1 then
      prev = c > 0 and c or 0
    elseif w > bucket then
      -- A window after the current one counts wholly in the current window (see "about").
      curr = p + c
    end
  end
end
local weight = prev * (period - elapsed) / period + curr
reset = (bucket + 1) * period - now
if curr > 0 then
  reset = reset + period
end
if cost > requests then
  ok, r, retry = false, math.floor(math.max(0, requests - weight)), -1
elseif weight + cost > requests then
  ok, r = false, math.floor(math.max(0, requests - weight))
  if prev > 0 and curr + cost <= requests then
    -- Fits within this window once prev's weight has drained enough.
    retry = (weight + cost - requests) * period / prev
  else
    -- Only after this window ends, with curr as the draining previous window.
    retry = (period - elapsed) + (1 - (requests - cost) / curr) * period
  end
else
  ok, r, retry = true, math.floor(requests - weight - cost), 0
  if curr + cost > 0 then
    -- What this window counts drains by the end of the next one (a peek's cost 0 with
    -- nothing counted here leaves the reset above: prev drains by this window's end).
    reset = (bucket + 2) * period - now
  end
  vals[i] = struct.pack('<ddd', bucket, prev, curr + cost)
end
{{- end}}

{{- define "adjust" -}}
-- The change, after "limit" at cost 0, with its locals (bucket, prev,
-- curr); op and amount are the adjustment's. A reset counts 0 in both windows (a grant goes
-- too); a refund takes back up to amount of what this window counted, then of the previous
-- window's, never below 0; a grant counts this window below 0, down to -2^40: units beyond
-- the limit until this window ends (as the previous window, a count below 0 reads as 0). A
-- charge counts amount more in this window, past the limit if it must.
local p, c = prev, curr
if op == 'unreserve' then
  -- A refund of the window the reservation was counted in (ago µs before now): this one's
  -- count, or the previous one's; nothing once that window is older.
  local at = math.floor((now - ago) / period)
  if at == bucket then
    c = curr - math.min(amount, math.max(curr, 0))
  elseif at == bucket - 1 then
    p = math.max(0, prev - amount)
  end
elseif op == 'reset' then
  p, c = 0, 0
elseif op == 'refund' then
  local back = math.min(amount, math.max(curr, 0))
  c = curr - back
  p = math.max(0, prev - (amount - back))
elseif op == 'charge' then
  c = math.min(curr + amount, 4503599627370496)
else
  c = math.max(curr - amount, -1099511627776)
end
if p ~= prev or c ~= curr then
  vals[i] = struct.pack('<ddd', bucket, p, c)
  adj = true
end
{{- end}}

{{- define "unlease" -}}
-- A previous lease's unspent units back (the lease script): the count of the lease's window (mark,
-- its number) loses the m unspent units, only while that window is still the current one
-- (never below 0, never another window); a count of 0 or below takes nothing back.
if #v == 24 then
  local w, p, c = struct.unpack('<ddd', v)
  if w == mark and math.floor(now / b) == mark and m > 0 and c > 0 then
    vals[i] = struct.pack('<ddd', w, p, math.max(0, c - m))
    redis.call('SET', KEYS[i], vals[i], 'KEEPTTL')
    returned = math.max(returned, math.min(m, c))
  end
end
{{- end}}

{{- define "offset" -}}
-- A lease's offset on limit i (the lease script): the µs until the window it was taken in ends (a
-- unit is spent before it ends).
offs[i] = reset - b
{{- end}}

{{- define "mark" -}}
-- A lease's record of limit i (the lease script): its window's number.
mark = math.floor(now / b)
{{- end}}
