{{- define "about" -}}
-- The algorithm: a fixed window counter. A limit is requests per period, or per calendar
-- window (a day, week or month the sidecar computed in its time zone). Its state is struct
-- '<dd' (the window, the count in it; below 0 after a grant: units beyond the limit until
-- that window ends). The window is stored, not inferred from expiry, so a late expiry never
-- merges two windows: for a period, its number floor(now / period); for a calendar window,
-- its end in µs. A stored window that may still be current counts in the current one, so
-- nothing counted is forgotten by a clock that moved backwards or an edit (a period raised,
-- a period turned calendar or back, a unit changed): for a period, a stored number at or
-- after the current one (or a calendar end, always larger); for a calendar window, an end
-- still ahead of now (or a period's number, always smaller). No reply reaches past the
-- current window, and remaining is never below 0 (a count above a lowered requests leaves
-- 0). A value that is not 16 bytes counts as fresh state, overwritten by the next admission.
-- Limit i's two numbers in ARGV: requests, then the period in µs or a calendar window
-- "start:end" (µs, the Unix epoch), which the server clock must be in: outside it, the
-- script answers {-1, now_us} having read or written nothing, and the caller may ask again
-- with the windows that hold now_us. With a calendar window the keys live at least an hour
-- past the window's end, whatever the ttl says.
{{- end}}

{{- define "limit" -}}
-- One limit, in a loop over them (i): a, b = requests, period (or a calendar window).
local requests, period = a, b
local win, ends, cal = 0, 0, type(period) == 'string'
if cal then
  local s, e = string.match(period, '^(%d+):(%d+)$')
  if not e then
    return redis.error_reply('ERR ratelimit: a calendar window is "start:end" in µs')
  end
  s, e = s + 0, e + 0
  if now < s or now >= e then
    return {-1, now}
  end
  win, ends = e, e
  -- The key lives an hour past the window's end (whole ms, rounded up), whatever ARGV[2]
  -- says; arithmetic, not math.max and math.ceil: no calls.
  local life = e - now + 3600000999
  life = (life - life % 1000) / 1000
  if life > px + 0 then
    px = life
  end
else
  win = math.floor(now / period)
  ends = (win + 1) * period
end
local count = 0
local v = vals[i]
if v and #v == 16 then
  local w, c = struct.unpack('<dd', v)
  -- A stored window that may still be current counts in the current one (see "about"):
  -- nothing counted is forgotten, nothing waits past this window. The count must be below
  -- 2^53 and at least -2^40 (false for NaN): anything else is not ours. Below 0 is a grant:
  -- units beyond the limit in this window.
  if (w >= win or cal and (w > now or w < 1e14)) and c >= -1099511627776 and c < 9007199254740992 then
    count = c - c % 1
  end
end
reset = ends - now
if cost > requests then
  ok, r, retry = false, math.max(0, requests - count), -1
elseif count + cost > requests then
  ok, r, retry = false, math.max(0, requests - count), reset
else
  ok, r, retry = true, requests - count - cost, 0
  vals[i] = struct.pack('<dd', win, count + cost)
end
{{- end}}

{{- define "adjust" -}}
-- The change, after "limit" at cost 0, with its locals (win, count, cal, period);
-- op and amount are the adjustment's. A reset counts 0 (a grant goes too); a refund takes
-- back up to amount of what this window counted, never below 0; a grant counts below 0, down
-- to -2^40: units beyond the limit until this window ends (the next reads as fresh). A
-- charge counts amount more, past the limit if it must (below 2^53); an unreserve is a refund
-- while the window the reservation was counted in (ago µs before now) is this one, else
-- nothing: that window, and what it counted, has ended.
local to, o = count, op
if o == 'unreserve' then
  local from = cal and tonumber(string.match(period, '^(%d+):')) or win * period
  o = from <= now - ago and 'refund' or 'none'
end
if o == 'reset' then
  to = 0
elseif o == 'refund' then
  if count > 0 then
    to = math.max(0, count - amount)
  end
elseif o == 'charge' then
  to = math.min(count + amount, 4503599627370496)
elseif o == 'grant' then
  to = math.max(count - amount, -1099511627776)
end
if to ~= count then
  vals[i] = struct.pack('<dd', win, to)
  adj = true
end
{{- end}}

{{- define "unlease" -}}
-- A previous lease's unspent units back (the lease script): the count of the lease's window loses
-- the m unspent units, only while that window is still the current one (never below 0,
-- never another window). mark is the window's number, or a calendar window's end (b = -1).
-- A count of 0 or below (a reset or a grant since) takes nothing back: a return never adds
-- to a grant, nor undoes a reset.
if #v == 16 then
  local w, c = struct.unpack('<dd', v)
  local current = b > 0 and math.floor(now / b) == mark or b < 0 and now < mark
  if w == mark and current and m > 0 and c > 0 then
    vals[i] = struct.pack('<dd', w, math.max(0, c - m))
    redis.call('SET', KEYS[i], vals[i], 'KEEPTTL')
    returned = math.max(returned, math.min(m, c))
  end
end
{{- end}}

{{- define "offset" -}}
-- A lease's offset on limit i (the lease script): the µs until the window it was taken in ends (a
-- unit is spent before it ends).
offs[i] = reset
{{- end}}

{{- define "mark" -}}
-- A lease's record of limit i (the lease script): its window's number, or for a calendar window its
-- end, now + the µs left in it (recorded as b = -1).
if b then
  mark = math.floor(now / b)
else
  mark, b = now + offs[i], -1
end
{{- end}}
