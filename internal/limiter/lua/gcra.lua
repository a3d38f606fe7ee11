-- gcra.lua: generic cell rate algorithm (virtual scheduling), any number of limits checked
-- and debited atomically.
--
-- State is one value per limit: the theoretical arrival time (TAT) in µs of the Redis
-- clock. T is the emission interval (period / requests in whole µs, computed by the
-- client); a request of cost c conforms when max(TAT, now) + c*T - now <= burst*T, and its
-- retry-after is the exact moment it would. Integers keep the arithmetic exact. Without
-- keep-usage the value is the TAT (int-encoded, small); with keep-usage it is struct '>dd'
-- (TAT, the T it was written at), so that a call at another T (a tier change, a per-caller
-- override) keeps the caller's usage in cells. Either call reads either format
-- (keep_usage.lua says how). For equal requests, period and burst GCRA admits exactly what
-- TokenBucket admits.
--
-- KEYS[1..n]   one state key per limit, all under one hash tag. A value of neither format
--              (or a key of another type) counts as idle and is overwritten on the next
--              admitted write; a TAT beyond now + burst * T (an edit or a tier change
--              lowered the limit, a clock moved backwards) counts as now + burst * T.
-- KEYS[n+1]    the idempotency key, present only when ARGV[3] ~= "0".
-- ARGV[1]      cost: cells this request takes (integer >= 1).
-- ARGV[2]      ttl: PX in ms set on every state key written (>= burst * T).
-- ARGV[3]      idempotency ttl in ms; "0" = no idempotency key.
-- ARGV[4], ARGV[5]  only when ARGV[3] ~= "0": the request's fingerprint (16 bytes) and the
--              most times its id may replay the first decision; the limits follow, from
--              ARGV[2i+4]. A replay needs the same fingerprint; another request under a
--              seen id, or one replay beyond the bound, is checked as a new request.
-- ARGV[2i+2], ARGV[2i+3]  limit i: T (µs, >= 1), burst.
-- ARGV[last]   "keep", only for keep-usage (one argument more than the limits need): every
--              state written is struct '>dd' (TAT, T).
-- Reply        code = allowed(1) + 2*replayed + 4*limit index + 64*remaining (tightest
--              limit when allowed, denying limit when denied); retry_after -1 means never
--              (cost > burst); reset_after is until the TAT. A fresh admission with
--              remaining < 2^20 and reset_after < 2^27 ms replies with one integer,
--              code + 2^26 * reset_after_ms; every other reply is
--              {code, retry_after_ms, reset_after_ms}. A denial writes nothing but the
--              '>dd' values it read at another T whose debt fit this limit's burst,
--              rescaled to this T (no debit); a value whose debt had to be capped at the
--              burst stays as it is, keeping the whole debt at the T it records.
-- Cost         O(n) in the number of limits (n <= 8): TIME, one GETRANGE per key (at most
--              STATE or REPLAY bytes, prelude.lua), n SETs; O(1) for one limit without an
--              idempotency key (with or without keep-usage): TIME, one GETRANGE, one SET.
-- Refused      any other shape (no limit or more than 8, KEYS and ARGV counts that do not
--              agree, a fingerprint that is not 16 bytes): an ERR reply before any read or
--              write, so the bound above holds whatever a caller sends.
-- @single: one limit without an idempotency key (see driver.lua). The driver has set now
-- (µs, server clock), v (the state key's value), cost, a, b (the limit's two numbers) and
-- keep (a keep-usage call); the body sets new (the value to write when it admits, else nil),
-- r, retry and rs, and moved (the value to write when it denies, else nil). Each "-- @read"
-- line is keep_usage.lua's code, setting at, rescaled and capped.
local T, burst = a, b
local tau = burst * T
local cap = tau
-- @read
local tat = at
if not (tat >= now) then
  tat = now -- idle, a clock that moved backwards, or not a number
elseif tat > now + tau then
  -- Further off than the burst tolerance (an edit lowered burst * T, or the clock moved
  -- backwards): no cell left, and no reply reaches past now + tau.
  tat = now + tau
end
-- A grant's credit (0 without one) pays first: take of the cost; the cells pay the rest.
local take = credit < cost and credit or cost
local new_tat = tat + (cost - take) * T
-- Integers below 2^53 throughout: x - x % T is T * floor(x / T) exactly, and
-- (x + (-x) % 1000) / 1000 is ceil(x / 1000), without a function call.
if cost - take <= burst and new_tat - now <= tau then
  new, r, rs = new_tat, now + tau - new_tat, new_tat - now
  if credit > take then
    new = struct.pack('>dddd', new, T, credit - take, till)
  elseif keep then
    new = struct.pack('>dd', new, T)
  end
  credit = credit - take
else
  r, rs, retry = now + tau - tat, tat - now, -1
  if cost - take <= burst then
    retry = new_tat - now - tau
    retry = (retry + (-retry) % 1000) / 1000
  end
  if rescaled and not capped then
    -- Read at another T: now at this one.
    moved = credit > 0 and struct.pack('>dddd', tat, T, credit, till) or keep and struct.pack('>dd', tat, T) or tat
  end
end
r = (r - r % T) / T
if r < 0 then
  r = 0 -- never below 0
end
r = r + credit
rs = (rs + (-rs) % 1000) / 1000
-- @body: runs inline in the driver's loop over limits (see driver.lua) and in lease.lua's;
-- a, b = T, burst. A value read at another T and not capped goes into moves[i], written if
-- the call denies.
local T, burst = a, b
local tau = burst * T
local cap = tau
local v = vals[i]
-- @read
local tat = at
if not (tat >= now) then
  tat = now
elseif tat > now + tau then
  tat = now + tau -- as in the single-limit path
end
if rescaled and not capped then
  -- Read at another T: written back at this one if the call denies (see keep_usage.lua;
  -- a capped value is not: it keeps the whole debt).
  moves = moves or {}
  moves[i] = credit > 0 and struct.pack('>dddd', tat, T, credit, till) or keep and struct.pack('>dd', tat, T) or tat
end
-- As in the single-limit path: a grant's credit pays first.
local take = math.min(credit, cost)
local new_tat = tat + (cost - take) * T
local left = math.max(0, math.floor((now + tau - tat) / T)) + credit
if cost - take > burst then
  ok, r, retry, reset = false, left, -1, tat - now
elseif new_tat - now > tau then
  ok, r, retry, reset = false, left, new_tat - now - tau, tat - now
else
  ok, r, retry, reset = true, math.floor((now + tau - new_tat) / T) + credit - take, 0, new_tat - now
  if credit > take then
    vals[i] = struct.pack('>dddd', new_tat, T, credit - take, till)
  else
    vals[i] = keep and struct.pack('>dd', new_tat, T) or new_tat
  end
end
-- @adjust: runs in adjust.lua after the loop body at cost 0, with its locals (tat, T, keep,
-- credit, till, tau); op and amount are the adjustment's. As token_bucket.lua's: a reset
-- moves the TAT to now and drops any credit; a refund moves it back by up to amount cells,
-- never before now, never touching a credit; a grant adds amount to the credit, cells beyond
-- the burst taken first, until burst * T from now (or an earlier grant's end, if later). A
-- charge takes amount from the credit, then moves the TAT on, at most to now + tau (an empty
-- bucket); an unreserve is a refund.
local free, c, u = tat - now, credit, till
if op == 'reset' then
  c = 0
elseif op == 'refund' or op == 'unreserve' then
  if amount * T < free then
    free = amount * T
  end
elseif op == 'charge' then
  -- As token_bucket.lua's: the credit first, then the TAT, at most to now + tau.
  local take = math.min(credit, amount)
  free, c = -math.min((amount - take) * T, now + tau - tat), credit - take
else
  free, c, u = 0, math.min(credit + amount, 1099511627776), math.max(till, now + tau)
end
if free ~= 0 or c ~= credit then
  if c > 0 then
    vals[i] = struct.pack('>dddd', tat - free, T, c, u)
  else
    vals[i] = keep and struct.pack('>dd', tat - free, T) or tat - free
  end
  adj = true
end
