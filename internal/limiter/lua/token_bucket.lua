-- token_bucket.lua: token bucket, any number of limits checked and debited atomically.
--
-- KEYS[1..n]   one state key per limit, all under one hash tag. Value: struct '<dd'
--              (tokens, last refill time in µs of the Redis clock).
-- KEYS[n+1]    the idempotency key, present only when ARGV[3] > 0.
-- ARGV[1]      cost: tokens this request takes from every limit (integer >= 1).
-- ARGV[2]      ttl: PX in ms set on every state key written (>= time to refill from empty).
-- ARGV[3]      idempotency ttl in ms; 0 = no idempotency key.
-- ARGV[3i+1..3i+3] for limit i: requests, period in µs, burst (the bucket capacity).
--              Tokens refill at requests/period up to burst.
-- Reply        {allowed 0|1, remaining, limit, retry_after_ms (-1: never, cost > capacity),
--              reset_after_ms, denying limit index (0 when allowed), replayed 0|1}.
--              remaining/limit/reset are the tightest limit's when allowed, the denying
--              limit's when denied; a denied request writes nothing.
-- Cost         O(n) in the number of limits (n <= 8): TIME, one MGET, n SETs; no loops over
--              data, no key names built here.
local KEYS_PER_LIMIT = 1

local function check(i, vals, sec, usec, cost, requests, period, burst, writes)
  local now = sec * 1000000 + usec
  local rate = requests / period
  local tokens, ts = burst, now
  if vals[i] then
    tokens, ts = struct.unpack('<dd', vals[i])
  end
  -- A clock that moved backwards (failover to another primary) refills nothing.
  if now > ts then
    tokens = math.min(burst, tokens + (now - ts) * rate)
    ts = now
  end
  if cost > burst then
    return false, math.floor(tokens), burst, -1, (burst - tokens) / rate
  end
  if tokens < cost then
    return false, math.floor(tokens), burst, (cost - tokens) / rate, (burst - tokens) / rate
  end
  tokens = tokens - cost
  writes[#writes + 1] = KEYS[i]
  writes[#writes + 1] = struct.pack('<dd', tokens, ts)
  return true, math.floor(tokens), burst, 0, (burst - tokens) / rate
end
