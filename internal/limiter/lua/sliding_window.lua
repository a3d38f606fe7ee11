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
-- @body: runs inline in the driver's loop over limits (see driver.lua); a, b = requests,
-- period.
local requests, period = a, b
local bucket = math.floor(now / period)
local ci = 2 * i - 1 + bucket % 2
local pi = 2 * i - bucket % 2
local curr, prev = 0, 0
local v = vals[ci]
if v and #v == 16 then
  local w, c = struct.unpack('<dd', v)
  if w == bucket then
    curr = c
  end
end
v = vals[pi]
if v and #v == 16 then
  local w, c = struct.unpack('<dd', v)
  if w == bucket - 1 then
    prev = c
  end
end
local elapsed = now - bucket * period
local weight = prev * (period - elapsed) / period + curr
reset = (bucket + 1) * period - now
if curr > 0 then
  reset = reset + period
end
if cost > requests then
  ok, r, retry = false, math.floor(math.max(0, requests - weight)), -1
elseif weight + cost > requests then
  ok, r = false, math.floor(math.max(0, requests - weight))
  if prev > 0 and curr + cost <= requests then
    -- Fits within this window once prev's weight has drained enough.
    retry = (weight + cost - requests) * period / prev
  else
    -- Only after this window ends, with curr as the draining previous window.
    retry = (period - elapsed) + (1 - (requests - cost) / curr) * period
  end
else
  ok, r, retry, reset = true, math.floor(requests - weight - cost), 0, (bucket + 2) * period - now
  vals[ci] = struct.pack('<dd', bucket, curr + cost)
  vals[pi] = false -- the previous window's slot is left as it is
end
