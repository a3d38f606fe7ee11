-- token_bucket.lua: token bucket, any number of limits checked and debited atomically.
--
-- State is one integer per limit: the Redis-clock time in µs at which the bucket is full
-- again. Tokens now = burst - (full_at - now) / T, where T is the refill time of one token
-- (period / requests in whole µs, computed by the client). Whole microseconds keep the
-- arithmetic exact (no rounding can admit an extra request), and an integer value keeps the
-- key small (Redis stores it int-encoded, 16 bytes less than an 8-byte binary string).
--
-- KEYS[1..n]   one state key per limit, all under one hash tag. A value that is not an
--              integer (or a key of another type) counts as a full bucket and is
--              overwritten on the next admitted write.
-- KEYS[n+1]    the idempotency key, present only when ARGV[3] ~= "0".
-- ARGV[1]      cost: tokens this request takes from every limit (integer >= 1).
-- ARGV[2]      ttl: PX in ms set on every state key written (>= burst * T).
-- ARGV[3]      idempotency ttl in ms; "0" = no idempotency key.
-- ARGV[2i+2], ARGV[2i+3]  limit i: T (µs per token, >= 1), burst (the capacity).
-- Reply        {code, retry_after_ms, reset_after_ms}: code = allowed(1) + 2*replayed +
--              4*limit index + 64*remaining, the index and remaining of the tightest limit
--              when allowed, of the denying limit when denied (retry_after -1: never, cost >
--              burst). reset_after is until that bucket is full. A denial writes nothing.
-- Cost         O(n) in the number of limits (n <= 8): one MGET, TIME, n SETs; no loops over
--              data, no key names built here.
-- @body: runs inline in the driver's loop over limits (see driver.lua); a, b = T, burst.
local T, burst = a, b
local cap = burst * T
local full = tonumber(vals[i]) or now
if full < now then
  full = now -- idle, or a clock that moved backwards (failover): refill nothing extra
end
local used = full - now
local after = used + cost * T
if cost > burst then
  ok, r, retry, reset = false, math.max(0, math.floor((cap - used) / T)), -1, used
elseif after > cap then
  ok, r, retry, reset = false, math.max(0, math.floor((cap - used) / T)), after - cap, used
else
  ok, r, retry, reset = true, math.floor((cap - after) / T), 0, after
  vals[i] = now + after
end
