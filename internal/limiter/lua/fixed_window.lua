-- fixed_window.lua: fixed window counter, any number of limits checked and debited atomically.
--
-- KEYS[1..n]   one state key per limit, all under one hash tag. Value: struct '<dd'
--              (window number = floor(now / period), count in that window). The window
--              number is stored, not inferred from expiry, so a late expiry never merges
--              two windows.
--              A value that is not 16 bytes (or a key of another type) counts as
--              fresh state and is overwritten on the next admitted write.
-- KEYS[n+1]    the idempotency key, present only when ARGV[3] ~= "0".
-- ARGV[1]      cost: requests this request counts for (integer >= 1).
-- ARGV[2]      ttl: PX in ms set on every state key written (>= period).
-- ARGV[3]      idempotency ttl in ms; "0" = no idempotency key.
-- ARGV[2i+2], ARGV[2i+3]  limit i: requests, period in µs.
-- Reply        {code, retry_after_ms, reset_after_ms}: code = allowed(1) + 2*replayed +
--              4*limit index + 64*remaining (tightest limit when allowed, denying limit when
--              denied); retry_after -1: never (cost > requests). reset_after is the end of
--              the window.
-- Cost         O(n) in the number of limits (n <= 8): TIME, one MGET, n SETs.
-- @body: runs inline in the driver's loop over limits (see driver.lua); a, b = requests,
-- period.
local requests, period = a, b
local win = math.floor(now / period)
local count = 0
local v = vals[i]
if v and #v == 16 then
  local w, c = struct.unpack('<dd', v)
  -- A clock that moved backwards keeps counting in the newest window seen.
  if w >= win then
    win, count = w, c
  end
end
reset = (win + 1) * period - now
if cost > requests then
  ok, r, retry = false, requests - count, -1
elseif count + cost > requests then
  ok, r, retry = false, requests - count, reset
else
  ok, r, retry = true, requests - count - cost, 0
  vals[i] = struct.pack('<dd', win, count + cost)
end
