-- token_bucket.lua: token bucket, any number of limits checked and debited atomically.
--
-- State is one integer per limit: the Redis-clock time (µs) at which the bucket is full
-- again. Tokens now = burst - (full_at - now) / T, where T is the refill time of one token
-- (period / requests, in whole µs, computed by the client). One integer keeps the key small
-- (Redis stores it int-encoded) and the arithmetic exact: no rounding can admit an extra
-- request.
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
local KEYS_PER_LIMIT = 1

local function check(i, vals, now, cost, T, burst, writes)
  local cap = burst * T
  local full = tonumber(vals[i]) or now
  if full < now then
    full = now
  end
  local used = full - now
  if cost > burst then
    return false, math.max(0, math.floor((cap - used) / T)), -1, used
  end
  local after = used + cost * T
  if after > cap then
    return false, math.max(0, math.floor((cap - used) / T)), after - cap, used
  end
  writes[#writes + 1] = KEYS[i]
  writes[#writes + 1] = now + after
  return true, math.floor((cap - after) / T), 0, after
end
