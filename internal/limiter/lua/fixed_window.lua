-- fixed_window.lua: fixed window counter, any number of limits checked and debited atomically.
--
-- KEYS[1..n]   one state key per limit, all under one hash tag. Value: struct '<dd'
--              (window number = floor(now / period), count in that window). The window
--              number is stored, not inferred from expiry, so a late expiry never merges
--              two windows.
-- A value that is not 16 bytes (or a key of another type: MGET reads it as nil) is
--              treated as fresh state and overwritten on the next admitted write.
-- KEYS[n+1]    the idempotency key, present only when ARGV[3] > 0.
-- ARGV[1]      cost: requests this request counts for (integer >= 1).
-- ARGV[2]      ttl: PX in ms set on every state key written (>= period).
-- ARGV[3]      idempotency ttl in ms; 0 = no idempotency key.
-- ARGV[3i+1..3i+3] for limit i: requests, period in µs, unused (0).
-- Reply        {allowed 0|1, remaining, limit, retry_after_ms (-1: never, cost > requests),
--              reset_after_ms (end of the window), denying limit index (0 when allowed),
--              replayed 0|1}.
-- Cost         O(n) in the number of limits (n <= 8): TIME, one MGET, n SETs.
local KEYS_PER_LIMIT = 1

local function check(i, vals, now, cost, requests, period, _, writes)
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
  local reset = (win + 1) * period - now
  if cost > requests then
    return false, requests - count, requests, -1, reset
  end
  if count + cost > requests then
    return false, requests - count, requests, reset, reset
  end
  count = count + cost
  writes[#writes + 1] = KEYS[i]
  writes[#writes + 1] = struct.pack('<dd', win, count)
  return true, requests - count, requests, 0, reset
end
