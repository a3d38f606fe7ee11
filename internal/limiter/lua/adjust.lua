-- adjust.lua: an administrative change to one identity's counters of a policy: reset them,
-- refund units charged, or grant units beyond the limit for the current window; or a
-- settlement of a cost known after the response: charge what it cost beyond its
-- reservation, or unreserve what it did not use. The Go side
-- composes one script per algorithm: this driver with the algorithm's loop body (after
-- its @body marker line) inlined at both @check markers below and its adjustment (after
-- its @adjust marker line) at the @adjust marker. Each limit's body runs at cost 0 to read the
-- state as a check reads it (and leave its locals for the adjustment), the adjustment sets
-- the new state into vals[i], and the body runs again at cost 0 on it to report what
-- remains. Idempotent: the first call under a request id records its reply, and a retry
-- with the same adjustment gets that reply back and changes nothing.
--
-- KEYS[1..n]   the policy's state keys for the identity, all under one hash tag.
-- KEYS[n+1]    the adjustment's record (same tag): the fingerprint, then the reply's numbers.
-- ARGV[1]      amount: units to refund, grant, charge or unreserve (a whole number, 1 to
--              2^40); "0" for a reset.
-- ARGV[2]      ttl: PX in ms of the state keys written (a calendar window may raise it).
-- ARGV[3]      the record's ttl in ms (>= 1).
-- ARGV[4]      the adjustment's fingerprint (16 bytes): a retry must bring the same one.
-- ARGV[5]      op: "reset" (every limit as fresh, grants included), "refund" (undo charges:
--              never more than the limit holds when full, never touching a grant), "grant"
--              (windows: units beyond the limit until the current window ends; TokenBucket
--              and GCRA: a credit beyond the burst for the bucket's refill time, see
--              keep_usage.lua), "charge" (a settlement's cost beyond its reservation: debit
--              amount whether or not it fits; windows count past the limit until the window
--              ends, a bucket empties at most), "unreserve" (a settlement's unused
--              reservation, taken ARGV[6] µs ago: a refund, but a window gives back only
--              while the window the reservation was counted in is current or, sliding, the
--              previous one).
-- ARGV[6]      ago: for "unreserve", µs since the reservation (a whole number >= 0); "0"
--              for the other ops.
-- ARGV[2i+5], ARGV[2i+6]  limit i: as the algorithm's check script takes it.
-- ARGV[last]   "keep", where the algorithm takes it: values are written at this T.
-- Reply        {replayed, r_1, applied_1, reset_1, ..., r_n, applied_n, reset_n}: replayed 1
--              when this is a retry's recorded reply (nothing changed now); per limit what
--              remains after the change, the units it freed (remaining after minus before,
--              0 when nothing changed) and the ms until the limit is full again.
--              {-1, now_us}: the server clock is outside a calendar window given (nothing
--              read or written), as the check script answers it.
--              An error when the request id was recorded for another adjustment.
-- Cost         O(n) in the number of limits (n <= 8): TIME, one MGET, each body run twice,
--              at most n + 1 SETs; no loops over data, no key names built here.
-- Refused      any other shape (no limit or more than 8, KEYS and ARGV counts that do not
--              agree, a fingerprint that is not 16 bytes, an unknown op, an amount that is
--              not a whole number in range, "keep" for an algorithm that does not keep
--              usage): an ERR reply before any read.

-- keeps: composed true by the Go side for the algorithms whose bodies read state through
-- keep_usage.lua (TokenBucket, GCRA), false for the others, which refuse 'keep'.
local keeps = false
local keep = ARGV[#ARGV] == 'keep'
local n = (#ARGV - 6 - (keep and 1 or 0)) / 2
local op, amount, ago = ARGV[5], tonumber(ARGV[1]), tonumber(ARGV[6])
if n < 1 or n > 8 or n % 1 ~= 0 or #KEYS ~= n + 1 or #ARGV[4] ~= 16 or (keep and not keeps) or
    not (op == 'reset' and amount == 0 or (op == 'refund' or op == 'grant' or op == 'charge' or op == 'unreserve') and
      amount and amount >= 1 and amount <= 1099511627776 and amount % 1 == 0) or not ((tonumber(ARGV[3]) or 0) >= 1) or
    not (ago and ago >= 0 and ago < 9007199254740992 and ago % 1 == 0) then
  return redis.error_reply('ERR ratelimit: refused an adjustment of ' .. #KEYS .. ' keys and ' .. #ARGV ..
    ' arguments: this script takes 1 to 8 limits, one state key each, a record key, a 16-byte fingerprint,' ..
    ' reset (amount 0), refund, grant, charge or unreserve (a whole amount from 1 to 2^40), and a whole ago >= 0')
end

local vals = redis.call('MGET', unpack(KEYS))
local fp = ARGV[4]
local seen = vals[n + 1]
if seen then
  if string.sub(seen, 1, 16) ~= fp then
    return redis.error_reply('ERR ratelimit: this request id was used for another adjustment')
  end
  local out = {1}
  for x in string.gmatch(string.sub(seen, 17), '[^,]+') do
    out[#out + 1] = tonumber(x)
  end
  return out
end

local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
-- px: the state keys' PX, ARGV[2] unless a calendar window raises it (the body does).
local px = ARGV[2]
-- moves: what a denying check would rewrite; the adjustment writes every value it changes.
local moves
local cost = 0
local out = {0}
local changed = {}
for i = 1, n do
  local a, b = ARGV[5 + 2 * i] + 0, tonumber(ARGV[6 + 2 * i]) or ARGV[6 + 2 * i]
  -- adj: set true by the adjustment when it changed the state (vals[i]).
  local before, adj
  do
    -- The body's locals stay in scope for the adjustment: no block of its own here.
    local ok, r, retry, reset
    -- @check
    before = r
    -- The body at cost 0 has read the state into its locals; the adjustment puts the new
    -- state into vals[i] and sets adj when it changes anything.
    -- @adjust
  end
  local ok, r, retry, reset
  do
    -- @check
  end
  if r < 0 then
    r = 0
  end
  changed[i] = adj
  out[2 + 3 * (i - 1)] = r
  out[3 + 3 * (i - 1)] = adj and r - before or 0
  out[4 + 3 * (i - 1)] = math.ceil(reset / 1000)
end
for i = 1, n do
  if changed[i] then
    redis.call('SET', KEYS[i], vals[i], 'PX', px)
  end
end
local rec = {}
for k = 2, #out do
  rec[k - 1] = string.format('%.17g', out[k])
end
redis.call('SET', KEYS[n + 1], fp .. table.concat(rec, ','), 'PX', ARGV[3])
return out
