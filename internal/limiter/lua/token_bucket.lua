-- token_bucket.lua: token bucket, any number of limits checked and debited atomically.
--
-- State is one integer per limit: the Redis-clock time (µs) at which the bucket is full
-- again. Tokens now = burst - (full_at - now) / T, with T = period / requests rounded to the
-- microsecond (the refill time of one token). One integer keeps the key small (Redis stores
-- it int-encoded) and the arithmetic exact: no rounding can admit an extra request.
--
-- KEYS[1..n]   one state key per limit, all under one hash tag. A value that is not an
--              integer (or a key of another type: MGET reads it as nil) counts as a full
--              bucket and is overwritten on the next admitted write.
-- KEYS[n+1]    the idempotency key, present only when ARGV[3] > 0.
-- ARGV[1]      cost: tokens this request takes from every limit (integer >= 1).
-- ARGV[2]      ttl: PX in ms set on every state key written (>= time to refill from empty).
-- ARGV[3]      idempotency ttl in ms; 0 = no idempotency key.
-- ARGV[3i+1..3i+3] for limit i: requests, period in µs, burst (the bucket capacity).
--              Tokens refill at requests/period up to burst.
-- Reply        {allowed 0|1, remaining, limit, retry_after_ms (-1: never, cost > burst),
--              reset_after_ms (until full), denying limit index (0 when allowed),
--              replayed 0|1}. remaining/limit/reset are the tightest limit's when allowed,
--              the denying limit's when denied; a denied request writes nothing.
-- Cost         O(n) in the number of limits (n <= 8): TIME, one MGET, n SETs; no loops over
--              data, no key names built here.
local KEYS_PER_LIMIT = 1

local function check(i, vals, now, cost, requests, period, burst, writes)
  local T = math.floor(period / requests + 0.5)
  local cap = burst * T
  local full = tonumber(vals[i]) or now
  if full < now then
    full = now
  end
  local used = full - now
  local tokens = math.max(0, math.floor((cap - used) / T))
  if cost > burst then
    return false, tokens, burst, -1, used
  end
  if used + cost * T > cap then
    return false, tokens, burst, used + cost * T - cap, used
  end
  used = used + cost * T
  writes[#writes + 1] = KEYS[i]
  writes[#writes + 1] = string.format('%d', now + used)
  return true, math.floor((cap - used) / T), burst, 0, used
end
