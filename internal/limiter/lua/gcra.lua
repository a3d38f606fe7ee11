-- gcra.lua: generic cell rate algorithm (virtual scheduling), any number of limits checked
-- and debited atomically.
--
-- State is one integer per limit: the theoretical arrival time (TAT), in µs of the Redis
-- clock. The emission interval is T = period / requests rounded to the microsecond; a
-- request of cost c is admitted when max(TAT, now) + c*T - now <= burst*T. Integers keep the
-- arithmetic exact and the key small (int-encoded). For equal requests, period and burst
-- GCRA admits exactly what TokenBucket admits; its reply's retry-after is the moment the
-- request would conform.
--
-- KEYS[1..n]   one state key per limit, all under one hash tag. A value that is not an
--              integer (or a key of another type: MGET reads it as nil) counts as idle and
--              is overwritten on the next admitted write.
-- KEYS[n+1]    the idempotency key, present only when ARGV[3] > 0.
-- ARGV[1]      cost: cells this request takes (integer >= 1).
-- ARGV[2]      ttl: PX in ms set on every state key written (>= burst * T).
-- ARGV[3]      idempotency ttl in ms; 0 = no idempotency key.
-- ARGV[3i+1..3i+3] for limit i: requests, period in µs, burst.
-- Reply        {allowed 0|1, remaining, limit, retry_after_ms (-1: never, cost > burst),
--              reset_after_ms (until TAT), denying limit index (0 when allowed), replayed 0|1}.
-- Cost         O(n) in the number of limits (n <= 8): TIME, one MGET, n SETs.
local KEYS_PER_LIMIT = 1

local function check(i, vals, now, cost, requests, period, burst, writes)
  local T = math.floor(period / requests + 0.5)
  local tau = burst * T
  local tat = tonumber(vals[i]) or now
  if tat < now then
    tat = now
  end
  local new_tat = tat + cost * T
  local left = math.max(0, math.floor((now + tau - tat) / T))
  if cost > burst then
    return false, left, burst, -1, tat - now
  end
  if new_tat - now > tau then
    return false, left, burst, new_tat - now - tau, tat - now
  end
  writes[#writes + 1] = KEYS[i]
  writes[#writes + 1] = string.format('%d', new_tat)
  return true, math.floor((now + tau - new_tat) / T), burst, 0, new_tat - now
end
