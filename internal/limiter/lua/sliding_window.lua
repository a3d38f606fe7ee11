-- sliding_window.lua: weighted two-window sliding window, any number of limits checked and
-- debited atomically. The estimate is prev * (part of the previous window still inside the
-- sliding window) + curr.
--
-- KEYS[1..n]   one state key per limit, all under one hash tag. Value: struct '<ddd'
--              (window number = floor(now / period), count of the window before it, count
--              in it; below 0 after a grant, adjust.lua: units beyond the limit until that
--              window ends, then read as 0): both windows the estimate needs in one key, so
--              one read and one write per limit. A stored window after the current one (a clock that moved
--              backwards, a period raised by an edit) counts wholly in the current window,
--              so no reply reaches past two windows of the current period.
--              A value that is not 24 bytes (or a key of another type) counts as
--              fresh state and is overwritten on the next admitted write.
-- KEYS[n+1]    the idempotency key, present only when ARGV[3] ~= "0".
-- ARGV[1]      cost: requests this request counts for (integer >= 1).
-- ARGV[2]      ttl: PX in ms set on every state key written (>= 2 * period: a window is
--              read as the previous window during the whole next window).
-- ARGV[3]      idempotency ttl in ms; "0" = no idempotency key.
-- ARGV[4], ARGV[5]  only when ARGV[3] ~= "0": the request's fingerprint (16 bytes) and the
--              most times its id may replay the first decision; the limits follow, from
--              ARGV[2i+4]. A replay needs the same fingerprint; another request under a
--              seen id, or one replay beyond the bound, is checked as a new request.
-- ARGV[2i+2], ARGV[2i+3]  limit i: requests, period in µs.
-- Reply        code = allowed(1) + 2*replayed + 4*limit index + 64*remaining (tightest
--              limit when allowed, denying limit when denied); retry_after -1 means never
--              (cost > requests); reset_after is until both windows are empty. A fresh
--              admission with remaining < 2^20 and reset_after < 2^27 ms replies with one
--              integer, code + 2^26 * reset_after_ms; every other reply is
--              {code, retry_after_ms, reset_after_ms}. A denial writes nothing.
-- Cost         O(n) in the number of limits (n <= 8): TIME, one GETRANGE per key (at most
--              STATE or REPLAY bytes, prelude.lua), n SETs; O(1) for one limit without an
--              idempotency key: TIME, one GETRANGE, one SET.
-- Refused      any other shape (no limit or more than 8, KEYS and ARGV counts that do not
--              agree, a fingerprint that is not 16 bytes): an ERR reply before any read or
--              write, so the bound above holds whatever a caller sends.
-- @single: one limit without an idempotency key (see driver.lua). The driver has set now
-- (µs, server clock), v (the state key's value), cost, and a, b (the limit's two numbers);
-- the body sets new (the value to write when it admits, else nil), r, retry and rs.
local requests, period = a, b
-- now - now % period is period * floor(now / period) exactly (integers below 2^53).
local elapsed = now % period
local bucket = (now - elapsed) / period
local prev, curr = 0, 0
if v and #v == 24 then
  local w, p, c = struct.unpack('<ddd', v)
  -- Counts must be below 2^53, the previous window's at least 0 and this one's at least
  -- -2^40 (false for NaN): anything else is not ours. Below 0 is a grant (adjust.lua): units
  -- beyond the limit in its window, which end with it (as the previous window it counts 0).
  if p >= 0 and c >= -1099511627776 and p + c < 9007199254740992 then
    if w == bucket then
      prev, curr = p, c
    elseif w == bucket - 1 then
      prev = c > 0 and c or 0
    elseif w > bucket then
      -- A window after the current one (a clock that moved backwards, or a period raised
      -- by an edit) counts wholly in the current window: nothing is forgotten, and nothing
      -- waits past two windows of the current period.
      curr = p + c
    end
  end
end
local weight = prev * (period - elapsed) / period + curr
if cost <= requests and weight + cost <= requests then
  new, r = struct.pack('<ddd', bucket, prev, curr + cost), math.floor(requests - weight - cost)
  rs = (bucket + 2) * period - now
  rs = (rs + (-rs) % 1000) / 1000
else
  r = math.floor(math.max(0, requests - weight))
  rs = (bucket + 1) * period - now
  if curr > 0 then
    rs = rs + period
  end
  rs, retry = math.ceil(rs / 1000), -1
  if cost <= requests then
    if prev > 0 and curr + cost <= requests then
      -- Fits within this window once prev's weight has drained enough.
      retry = (weight + cost - requests) * period / prev
    else
      -- Only after this window ends, with curr as the draining previous window.
      retry = (period - elapsed) + (1 - (requests - cost) / curr) * period
    end
    if retry > 0 then
      retry = math.ceil(retry / 1000)
    end
  end
end
-- @body: runs inline in the driver's loop over limits (see driver.lua); a, b = requests,
-- period.
local requests, period = a, b
local bucket = math.floor(now / period)
local elapsed = now - bucket * period
local prev, curr = 0, 0
local v = vals[i]
if v and #v == 24 then
  local w, p, c = struct.unpack('<ddd', v)
  -- As in the single-limit path.
  if p >= 0 and c >= -1099511627776 and p + c < 9007199254740992 then
    if w == bucket then
      prev, curr = p, c
    elseif w == bucket - 1 then
      prev = c > 0 and c or 0
    elseif w > bucket then
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
-- @adjust: runs in adjust.lua after the loop body at cost 0, with its locals (bucket, prev,
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
