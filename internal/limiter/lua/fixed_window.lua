-- fixed_window.lua: fixed window counter, any number of limits checked and debited atomically.
--
-- KEYS[1..n]   one state key per limit, all under one hash tag. Value: struct '<dd'
--              (window, count in that window; below 0 after a grant, adjust.lua: units
--              beyond the limit until that window ends). The window is stored, not inferred from
--              expiry, so a late expiry never merges two windows: for a period, its number
--              floor(now / period); for a calendar window, its end in µs. A stored window
--              that may still be current counts in the current one, so nothing counted is
--              forgotten by a clock that moved backwards or an edit (a period raised, a
--              period turned calendar or back, a unit changed): for a period, a stored
--              number at or after the current one (or a calendar end, always larger); for a
--              calendar window, an end still ahead of now (or a period's number, always
--              smaller). No reply reaches past the current window, and remaining is never
--              below 0 (a count above a lowered requests leaves 0).
--              A value that is not 16 bytes (or a key of another type) counts as
--              fresh state and is overwritten on the next admitted write.
-- KEYS[n+1]    the idempotency key, present only when ARGV[3] ~= "0".
-- ARGV[1]      cost: requests this request counts for (integer >= 1).
-- ARGV[2]      ttl: PX in ms set on every state key written (>= period); with a calendar
--              window, at least until an hour past the window's end.
-- ARGV[3]      idempotency ttl in ms; "0" = no idempotency key.
-- ARGV[4], ARGV[5]  only when ARGV[3] ~= "0": the request's fingerprint (16 bytes) and the
--              most times its id may replay the first decision; the limits follow, from
--              ARGV[2i+4]. A replay needs the same fingerprint; another request under a
--              seen id, or one replay beyond the bound, is checked as a new request.
-- ARGV[2i+2], ARGV[2i+3]  limit i: requests, then the period in µs, or a calendar window
--              "start:end" (µs, the Unix epoch): a day, week or month the sidecar computed
--              in its time zone, which the server clock must be in.
-- Reply        code = allowed(1) + 2*replayed + 4*limit index + 64*remaining (tightest
--              limit when allowed, denying limit when denied); retry_after -1 means never
--              (cost > requests); reset_after is the end of the window. A fresh admission
--              with remaining < 2^20 and reset_after < 2^27 ms replies with one integer,
--              code + 2^26 * reset_after_ms; every other reply is
--              {code, retry_after_ms, reset_after_ms}. A denial writes nothing.
--              {-1, now_us}: the server clock (now_us) is outside a calendar window given;
--              nothing was read or written, and the caller may ask again with the windows
--              that hold now_us.
-- Cost         O(n) in the number of limits (n <= 8): TIME, one GETRANGE per key (at most
--              STATE or REPLAY bytes, prelude.lua), n SETs; O(1) for one limit without an
--              idempotency key: TIME, one GETRANGE, one SET.
-- Refused      any other shape (no limit or more than 8, KEYS and ARGV counts that do not
--              agree, a fingerprint that is not 16 bytes, a calendar window that is not
--              "start:end"): an ERR reply before any write, so the bound above holds
--              whatever a caller sends.
-- @single: one limit without an idempotency key (see driver.lua). The driver has set now
-- (µs, server clock), v (the state key's value), cost, a, b (the limit's two arguments:
-- numbers, or requests and a calendar window) and px (ARGV[2], which a calendar window may
-- raise); the body sets new (the value to write when it admits, else nil), r, retry and rs.
local requests, period = a, b
-- Integers below 2^53 throughout: now - now % period is period * floor(now / period)
-- exactly, and (x + (-x) % 1000) / 1000 is ceil(x / 1000), without a function call.
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
  win = (now - now % period) / period
  ends = win * period + period
end
local count = 0
if v and #v == 16 then
  local w, c = struct.unpack('<dd', v)
  -- A stored window that may still be current counts in the current one (see the header):
  -- nothing counted is forgotten, nothing waits past this window. The count must be below
  -- 2^53 and at least -2^40 (false for NaN): anything else is not ours. Below 0 is a grant
  -- (adjust.lua): units beyond the limit in this window.
  if (w >= win or cal and (w > now or w < 1e14)) and c >= -1099511627776 and c < 9007199254740992 then
    count = c - c % 1
  end
end
rs = ends - now
rs = (rs + (-rs) % 1000) / 1000
if cost <= requests and count + cost <= requests then
  new, r = struct.pack('<dd', win, count + cost), requests - count - cost
else
  -- More counted than requests allows (an edit lowered it) leaves nothing, not less.
  r = requests - count
  if r < 0 then
    r = 0
  end
  retry = cost <= requests and rs or -1
end
-- @body: runs inline in the driver's loop over limits (see driver.lua); a, b = requests,
-- period.
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
  -- As in the single-limit path: a stored window that may still be current counts in it.
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
-- @adjust: runs in adjust.lua after the loop body at cost 0, with its locals (win, count);
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
