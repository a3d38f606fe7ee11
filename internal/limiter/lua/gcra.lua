-- gcra.lua: generic cell rate algorithm (virtual scheduling), any number of limits checked
-- and debited atomically.
--
-- KEYS[1..n]   one state key per limit, all under one hash tag. Value: struct '<dd', the
--              theoretical arrival time (TAT) as whole seconds plus microseconds, so the
--              arithmetic stays exact at microsecond resolution.
-- KEYS[n+1]    the idempotency key, present only when ARGV[3] > 0.
-- ARGV[1]      cost: cells this request takes (integer >= 1).
-- ARGV[2]      ttl: PX in ms set on every state key written (>= burst * period / requests).
-- ARGV[3]      idempotency ttl in ms; 0 = no idempotency key.
-- ARGV[3i+1..3i+3] for limit i: requests, period in µs, burst. The emission interval is
--              T = period / requests; a request is admitted when its TAT after debiting is
--              at most burst * T ahead of now.
-- Reply        {allowed 0|1, remaining, limit, retry_after_ms (-1: never, cost > burst),
--              reset_after_ms, denying limit index (0 when allowed), replayed 0|1}.
--              retry_after is exact: the moment the TAT falls back within tolerance.
-- Cost         O(n) in the number of limits (n <= 8): TIME, one MGET, n SETs.
local KEYS_PER_LIMIT = 1

local function check(i, vals, sec, usec, cost, requests, period, burst, writes)
  local T = period / requests
  local tau = burst * T
  local debt = 0
  if vals[i] then
    local ts, tus = struct.unpack('<dd', vals[i])
    debt = math.max(0, (ts - sec) * 1000000 + (tus - usec))
  end
  local after = debt + cost * T
  -- Tolerance far below one cell absorbs rounding of T; it can never admit a whole request.
  local slack = T * 1e-6
  if cost > burst then
    return false, math.max(0, math.floor((tau - debt) / T + 1e-6)), burst, -1, debt
  end
  if after > tau + slack then
    return false, math.max(0, math.floor((tau - debt) / T + 1e-6)), burst, after - tau, debt
  end
  local total = usec + after
  local carry = math.floor(total / 1000000)
  writes[#writes + 1] = KEYS[i]
  writes[#writes + 1] = struct.pack('<dd', sec + carry, total - carry * 1000000)
  return true, math.floor((tau - after) / T + 1e-6), burst, 0, after
end
