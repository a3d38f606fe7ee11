-- sliding_window.lua: weighted two-slot sliding window, any number of limits checked and
-- debited atomically. The estimate is prev * (part of the previous window still inside the
-- sliding window) + curr.
--
-- KEYS[2i-1], KEYS[2i]  the two slot keys of limit i, all under one hash tag. Window number
--              b uses KEYS[2i-1 + b % 2]; the client cannot know b (the clock is Redis's),
--              so both are declared. Value: struct '<dd' (window number, count).
--              A value that is not 16 bytes (or a key of another type) counts as
--              fresh state and is overwritten on the next admitted write.
-- KEYS[2n+1]   the idempotency key, present only when ARGV[3] ~= "0".
-- ARGV[1]      cost: requests this request counts for (integer >= 1).
-- ARGV[2]      ttl: PX in ms set on every slot written (>= 2 * period: a slot is read as the
--              previous window during the whole next window).
-- ARGV[3]      idempotency ttl in ms; "0" = no idempotency key.
-- ARGV[2i+2], ARGV[2i+3]  limit i: requests, period in µs.
-- Reply        {code, retry_after_ms, reset_after_ms}: code = allowed(1) + 2*replayed +
--              4*limit index + 64*remaining (tightest limit when allowed, denying limit when
--              denied); retry_after -1: never (cost > requests). reset_after is until both windows
--              are empty.
-- Cost         O(n) in the number of limits (n <= 8): TIME, one MGET of 2n keys, n SETs.
local KEYS_PER_LIMIT = 2

local function count_of(v, want)
  if not v or #v ~= 16 then
    return 0
  end
  local b, c = struct.unpack('<dd', v)
  if b == want then
    return c
  end
  return 0
end

-- wait_for is how long until weight + cost fits, prev's weight draining over the window.
local function wait_for(prev, curr, elapsed, period, cost, requests)
  local need = prev * (period - elapsed) / period + curr + cost - requests
  if prev > 0 and curr + cost <= requests then
    return need * period / prev
  end
  -- Only after this window ends, with curr as the draining previous window.
  return (period - elapsed) + (1 - (requests - cost) / curr) * period
end

local function check(i, vals, now, cost, requests, period, writes)
  local b = math.floor(now / period)
  local ci = 2 * i - 1 + b % 2
  local pi = 2 * i - b % 2
  local curr = count_of(vals[ci], b)
  local prev = count_of(vals[pi], b - 1)
  local elapsed = now - b * period
  local weight = prev * (period - elapsed) / period + curr
  local reset = (b + 1) * period - now
  if curr > 0 then
    reset = reset + period
  end
  if cost > requests then
    return false, math.floor(math.max(0, requests - weight)), -1, reset
  end
  if weight + cost > requests then
    return false, math.floor(math.max(0, requests - weight)),
      wait_for(prev, curr, elapsed, period, cost, requests), reset
  end
  writes[#writes + 1] = KEYS[ci]
  writes[#writes + 1] = struct.pack('<dd', b, curr + cost)
  return true, math.floor(requests - weight - cost), 0, (b + 2) * period - now
end
