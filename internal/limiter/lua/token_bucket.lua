-- token_bucket.lua: token bucket, any number of limits checked and debited atomically.
--
-- State is one value per limit: the Redis-clock time in µs at which the bucket is full
-- again. Tokens now = burst - (full_at - now) / T, where T is the refill time of one token
-- (period / requests in whole µs, computed by the client). Whole microseconds keep the
-- arithmetic exact (no rounding can admit an extra request). Without keep-usage the value is
-- that integer (Redis stores it int-encoded, 16 bytes less than an 8-byte binary string);
-- with keep-usage it is struct '>dd' (full_at, the T it was written at), so that a call at
-- another T (a tier change, a per-caller override) keeps the caller's usage in tokens.
-- Either call reads either format (keep_usage.lua says how).
--
-- KEYS[1..n]   one state key per limit, all under one hash tag. A value of neither format
--              (or a key of another type) counts as a full bucket and is overwritten on the
--              next admitted write; a value beyond now + burst * T (an edit or a tier change
--              lowered the limit, a clock moved backwards) counts as an empty bucket.
-- KEYS[n+1]    the idempotency key, present only when ARGV[3] ~= "0".
-- ARGV[1]      cost: tokens this request takes from every limit (integer >= 1).
-- ARGV[2]      ttl: PX in ms set on every state key written (>= burst * T).
-- ARGV[3]      idempotency ttl in ms; "0" = no idempotency key.
-- ARGV[4], ARGV[5]  only when ARGV[3] ~= "0": the request's fingerprint (16 bytes) and the
--              most times its id may replay the first decision; the limits follow, from
--              ARGV[2i+4]. A replay needs the same fingerprint; another request under a
--              seen id, or one replay beyond the bound, is checked as a new request.
-- ARGV[2i+2], ARGV[2i+3]  limit i: T (µs per token, >= 1), burst (the capacity).
-- ARGV[last]   "keep", only for keep-usage (one argument more than the limits need): every
--              state written is struct '>dd' (full_at, T).
-- Reply        code = allowed(1) + 2*replayed + 4*limit index + 64*remaining, the index and
--              remaining of the tightest limit when allowed, of the denying limit when
--              denied; reset_after is until that bucket is full, retry_after -1 means never
--              (cost > burst). A fresh admission with remaining < 2^20 and reset_after <
--              2^27 ms replies with one integer, code + 2^26 * reset_after_ms; every other
--              reply is {code, retry_after_ms, reset_after_ms}. A denial writes nothing but
--              the '>dd' values it read at another T whose debt fit this limit's burst,
--              rescaled to this T (no debit); a value whose debt had to be capped at the
--              burst stays as it is, keeping the whole debt at the T it records.
-- Cost         O(n) in the number of limits (n <= 8): TIME, one GETRANGE per key (at most
--              STATE or REPLAY bytes, prelude.lua), n SETs; O(1) for one limit without an
--              idempotency key (with or without keep-usage): TIME, one GETRANGE, one SET. No loops over data, no key names built here.
-- Refused      any other shape (no limit or more than 8, KEYS and ARGV counts that do not
--              agree, a fingerprint that is not 16 bytes): an ERR reply before any read or
--              write, so the bound above holds whatever a caller sends.
-- @single: one limit without an idempotency key (see driver.lua). The driver has set now
-- (µs, server clock), v (the state key's value), cost, a, b (the limit's two numbers) and
-- keep (a keep-usage call); the body sets new (the value to write when it admits, else nil),
-- r, retry and rs, and moved (the value to write when it denies, else nil). Each "-- @read"
-- line is keep_usage.lua's code, setting at, rescaled and capped.
local T, burst = a, b
local cap = burst * T
-- @read
local full = at
if not (full >= now) then
  full = now -- idle, a clock that moved backwards (failover), or not a number: refill nothing extra
elseif full > now + cap then
  -- Further off than this limit's refill time (an edit lowered burst * T, or the clock moved
  -- backwards): an empty bucket, so no reply reaches past the refill time.
  full = now + cap
end
local used = full - now
-- A grant's credit (0 without one) pays first: take of the cost; the bucket pays the rest.
local take = credit < cost and credit or cost
local after = used + (cost - take) * T
-- Integers below 2^53 throughout: x - x % T is T * floor(x / T) exactly, and
-- (x + (-x) % 1000) / 1000 is ceil(x / 1000), without a function call.
if cost - take <= burst and after <= cap then
  new, r, rs = now + after, cap - after, (after + (-after) % 1000) / 1000
  if credit > take then
    new = struct.pack('>dddd', new, T, credit - take, till)
  elseif keep then
    new = struct.pack('>dd', new, T)
  end
  credit = credit - take
else
  r, rs, retry = cap - used, (used + (-used) % 1000) / 1000, -1
  if cost - take <= burst then
    retry = after - cap
    retry = (retry + (-retry) % 1000) / 1000
  end
  if rescaled and not capped then
    -- Read at another T: now at this one.
    moved = credit > 0 and struct.pack('>dddd', full, T, credit, till) or keep and struct.pack('>dd', full, T) or full
  end
end
r = (r - r % T) / T
if r < 0 then
  r = 0 -- never below 0
end
r = r + credit
-- @body: runs inline in the driver's loop over limits (see driver.lua) and in lease.lua's;
-- a, b = T, burst. A value read at another T and not capped goes into moves[i], written if
-- the call denies.
local T, burst = a, b
local cap = burst * T
local v = vals[i]
-- @read
local full = at
if not (full >= now) then
  full = now -- idle, a clock that moved backwards (failover), or not a number: refill nothing extra
elseif full > now + cap then
  full = now + cap -- as in the single-limit path: at most an empty bucket
end
if rescaled and not capped then
  -- Read at another T: written back at this one if the call denies (see keep_usage.lua;
  -- a capped value is not: it keeps the whole debt).
  moves = moves or {}
  moves[i] = credit > 0 and struct.pack('>dddd', full, T, credit, till) or keep and struct.pack('>dd', full, T) or full
end
local used = full - now
-- As in the single-limit path: a grant's credit pays first.
local take = math.min(credit, cost)
local after = used + (cost - take) * T
if cost - take > burst then
  ok, r, retry, reset = false, math.max(0, math.floor((cap - used) / T)) + credit, -1, used
elseif after > cap then
  ok, r, retry, reset = false, math.max(0, math.floor((cap - used) / T)) + credit, after - cap, used
else
  ok, r, retry, reset = true, math.floor((cap - after) / T) + credit - take, 0, after
  if credit > take then
    vals[i] = struct.pack('>dddd', now + after, T, credit - take, till)
  else
    vals[i] = keep and struct.pack('>dd', now + after, T) or now + after
  end
end
-- @adjust: runs in adjust.lua after the loop body at cost 0, with its locals (full, used, T,
-- keep, credit, till, cap); op and amount are the adjustment's. A reset frees what is used
-- and drops any credit; a refund frees up to amount tokens of what is used (never beyond the
-- burst, never touching a credit); a grant adds amount to the credit, units beyond the burst
-- taken before the bucket's own, until the bucket's refill time (burst * T) from now (or
-- an earlier grant's end, if later). A charge takes amount from the credit, then the bucket,
-- which it empties at most; an unreserve is a refund (a bucket's tokens belong to no window).
local free, c, u = used, credit, till
if op == 'reset' then
  c = 0
elseif op == 'refund' or op == 'unreserve' then
  if amount * T < used then
    free = amount * T
  end
elseif op == 'charge' then
  -- Past what the bucket holds if it must: from the credit first, then the bucket, emptied
  -- at most (no value records a debt beyond an empty bucket).
  local take = math.min(credit, amount)
  free, c = -math.min((amount - take) * T, cap - used), credit - take
else
  free, c, u = 0, math.min(credit + amount, 1099511627776), math.max(till, now + cap)
end
if free ~= 0 or c ~= credit then
  if c > 0 then
    vals[i] = struct.pack('>dddd', full - free, T, c, u)
  else
    vals[i] = keep and struct.pack('>dd', full - free, T) or full - free
  end
  adj = true
end
