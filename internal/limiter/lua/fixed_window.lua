-- fixed_window.lua: fixed window counter, any number of limits checked and debited atomically.
--
-- KEYS[1..n]   one state key per limit, all under one hash tag. Value: struct '<dd'
--              (window number = floor(now / period), count in that window). The window
--              number is stored, not inferred from expiry, so a late expiry never merges
--              two windows. A stored window at or after the current one (a clock that
--              moved backwards, a period raised by an edit) counts in the current window,
--              so no reply reaches past the current window, and remaining is never below 0
--              (a count above a lowered requests leaves 0).
--              A value that is not 16 bytes (or a key of another type) counts as
--              fresh state and is overwritten on the next admitted write.
-- KEYS[n+1]    the idempotency key, present only when ARGV[3] ~= "0".
-- ARGV[1]      cost: requests this request counts for (integer >= 1).
-- ARGV[2]      ttl: PX in ms set on every state key written (>= period).
-- ARGV[3]      idempotency ttl in ms; "0" = no idempotency key.
-- ARGV[4], ARGV[5]  only when ARGV[3] ~= "0": the request's fingerprint (16 bytes) and the
--              most times its id may replay the first decision; the limits follow, from
--              ARGV[2i+4]. A replay needs the same fingerprint; another request under a
--              seen id, or one replay beyond the bound, is checked as a new request.
-- ARGV[2i+2], ARGV[2i+3]  limit i: requests, period in µs.
-- Reply        code = allowed(1) + 2*replayed + 4*limit index + 64*remaining (tightest
--              limit when allowed, denying limit when denied); retry_after -1 means never
--              (cost > requests); reset_after is the end of the window. A fresh admission
--              with remaining < 2^20 and reset_after < 2^27 ms replies with one integer,
--              code + 2^26 * reset_after_ms; every other reply is
--              {code, retry_after_ms, reset_after_ms}. A denial writes nothing.
-- Cost         O(n) in the number of limits (n <= 8): TIME, one MGET, n SETs; O(1) for one
--              limit without an idempotency key: TIME, one MGET of one key, one SET.
-- Refused      any other shape (no limit or more than 8, KEYS and ARGV counts that do not
--              agree, a fingerprint that is not 16 bytes): an ERR reply before any read or
--              write, so the bound above holds whatever a caller sends.
-- @single: one limit without an idempotency key (see driver.lua). The driver has set now
-- (µs, server clock), v (the state key's value), cost, and a, b (the limit's two numbers);
-- the body sets new (the value to write when it admits, else nil), r, retry and rs.
local requests, period = a, b
-- Integers below 2^53 throughout: now - now % period is period * floor(now / period)
-- exactly, and (x + (-x) % 1000) / 1000 is ceil(x / 1000), without a function call.
local win = (now - now % period) / period
local count = 0
if v and #v == 16 then
  local w, c = struct.unpack('<dd', v)
  -- A window at or after the current one counts in the current one: a clock that moved
  -- backwards, or a period raised by an edit (floor(now / old period) is then far above
  -- floor(now / new period)). Nothing counted is forgotten, nothing waits past this window.
  -- The count must be a whole number below 2^53 (false for NaN): anything else is not ours.
  if w >= win and c >= 1 and c < 9007199254740992 then
    count = c - c % 1
  end
end
rs = (win + 1) * period - now
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
local win = math.floor(now / period)
local count = 0
local v = vals[i]
if v and #v == 16 then
  local w, c = struct.unpack('<dd', v)
  -- As in the single-limit path: a window at or after this one counts in this one.
  if w >= win and c >= 1 and c < 9007199254740992 then
    count = c - c % 1
  end
end
reset = (win + 1) * period - now
if cost > requests then
  ok, r, retry = false, math.max(0, requests - count), -1
elseif count + cost > requests then
  ok, r, retry = false, math.max(0, requests - count), reset
else
  ok, r, retry = true, requests - count - cost, 0
  vals[i] = struct.pack('<dd', win, count + cost)
end
