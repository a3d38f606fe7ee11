-- gcra.lua: generic cell rate algorithm (virtual scheduling), any number of limits checked
-- and debited atomically.
--
-- State is one integer per limit: the theoretical arrival time (TAT) in µs of the Redis
-- clock. T is the emission interval (period / requests in whole µs, computed by the
-- client); a request of cost c conforms when max(TAT, now) + c*T - now <= burst*T, and its
-- retry-after is the exact moment it would. Integers keep the arithmetic exact and the key
-- small (int-encoded). For equal requests, period and burst GCRA admits exactly what
-- TokenBucket admits.
--
-- KEYS[1..n]   one state key per limit, all under one hash tag. A value that is not an
--              integer (or a key of another type) counts as idle and is overwritten on the
--              next admitted write.
-- KEYS[n+1]    the idempotency key, present only when ARGV[3] ~= "0".
-- ARGV[1]      cost: cells this request takes (integer >= 1).
-- ARGV[2]      ttl: PX in ms set on every state key written (>= burst * T).
-- ARGV[3]      idempotency ttl in ms; "0" = no idempotency key.
-- ARGV[2i+2], ARGV[2i+3]  limit i: T (µs, >= 1), burst.
-- Reply        {code, retry_after_ms, reset_after_ms}: code = allowed(1) + 2*replayed +
--              4*limit index + 64*remaining (tightest limit when allowed, denying limit when
--              denied); retry_after -1: never (cost > burst); reset_after is until the TAT.
-- Cost         O(n) in the number of limits (n <= 8): one MGET, TIME, n SETs.
-- @body: runs inline in the driver's loop over limits (see driver.lua); a, b = T, burst.
local T, burst = a, b
local tau = burst * T
local tat = tonumber(vals[i]) or now
if tat < now then
  tat = now
end
local new_tat = tat + cost * T
local left = math.max(0, math.floor((now + tau - tat) / T))
if cost > burst then
  ok, r, retry, reset = false, left, -1, tat - now
elseif new_tat - now > tau then
  ok, r, retry, reset = false, left, new_tat - now - tau, tat - now
else
  ok, r, retry, reset = true, math.floor((now + tau - new_tat) / T), 0, new_tat - now
  vals[i] = new_tat
end
