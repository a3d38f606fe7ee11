-- adjust: an administrative change to one identity's counters of a policy: reset them,
-- refund units charged, or grant units beyond the limit for the current window; or the
-- settlement of a reservation (the reserve script) by the cost its response stated: what it
-- cost beyond the reservation charged, what it did not use given back. For each limit the
-- algorithm's "limit" runs at cost 0 to read the state as a check reads it (and leave its
-- locals for the change), its "adjust" puts the new state into vals[i], and "limit" runs
-- again at cost 0 on it to report what remains.
--
-- Every call ends with a record (KEYS[n+1]) of its reply: a retry of the same change gets
-- that reply back and changes nothing. An adjustment's record is named by its request id; a
-- settlement's is the reservation's own record, written by the reserve script when the request was
-- admitted, so that a settlement counts only for a reservation the sidecar made, for this
-- caller and policy, once.
--
-- KEYS[1..n]   the policy's state keys for the identity, all under one hash tag.
-- KEYS[n+1]    the record (same tag). Adjustments: absent the first time. Settlements: the
--              reservation, struct '<dd' (the cost reserved, the Redis-clock µs of the
--              admission), absent when it was never made, has expired or was settled over a
--              record ttl ago. Either, once done: the 16-byte fingerprint, then struct '<d'
--              of each of the reply's figures after the first (24 + 24n bytes).
-- ARGV[1]      amount: units to refund or grant (a whole number, 1 to 2^40); "0" for a
--              reset; for a settlement the cost the response stated (0 to 2^40).
-- ARGV[2]      ttl: PX in ms of the state keys written (a calendar window may raise it).
-- ARGV[3]      the record's ttl in ms once done (>= 1).
-- ARGV[4]      the change's fingerprint (16 bytes): a retry must bring the same one.
-- ARGV[5]      op: "reset" (every limit as fresh, grants included), "refund" (undo charges:
--              never more than the limit holds when full, never touching a grant), "grant"
--              (windows: units beyond the limit until the current window ends; TokenBucket
--              and GCRA: a credit beyond the burst for the bucket's refill time, see
--              the bucket's "read"), "settle" (the reservation's cost replaced by amount: above
--              it, the difference is charged whether or not it fits, windows counting past
--              the limit until the window ends, a bucket emptying at most; below it, the
--              difference is given back as a refund, except that a window gives back only
--              while the window the reservation was counted in is current or, sliding, the
--              previous one).
-- ARGV[2i+4], ARGV[2i+5]  limit i: as the algorithm's check script takes it.
-- ARGV[last]   "keep", where the algorithm takes it: values are written at this T.
-- Reply        {replayed, r_1, applied_1, reset_1, ..., r_n, applied_n, reset_n, reserved}:
--              replayed 1 when this is a retry's recorded reply (nothing changed now); per
--              limit what remains after the change, the units it freed (remaining after
--              minus before, 0 when nothing changed) and the ms until the limit is full
--              again; reserved, the cost the settled reservation held (0 for adjustments).
--              {-1, now_us}: the server clock is outside a calendar window given (nothing
--              read or written), as the check script answers it.
--              An error when the record was made by another change, when a settlement finds
--              no reservation, or when the record is of no shape this script writes.
-- Cost         O(n) in the number of limits (n <= 8): TIME, one GETRANGE per key, each
--              body run twice, at most n + 1 SETs; no loops over data, no key names built
--              here.
-- Refused      any other shape (no limit or more than 8, KEYS and ARGV counts that do not
--              agree, a fingerprint that is not 16 bytes, an unknown op, an amount that is
--              not a whole number in range, "keep" for an algorithm that does not keep
--              usage): an ERR reply before any read.
--
{{template "about" .}}

{{template "prelude" .}}

-- keeps: whether this algorithm keeps usage (takes "keep").
local keeps = {{.Keeps}}
local keep = ARGV[#ARGV] == 'keep'
local n = (#ARGV - 5 - (keep and 1 or 0)) / 2
local op, amount = ARGV[5], tonumber(ARGV[1])
if n < 1 or n > 8 or n % 1 ~= 0 or #KEYS ~= n + 1 or #ARGV[4] ~= 16 or (keep and not keeps) or
    not (amount and amount % 1 == 0 and amount <= 1099511627776 and
      (op == 'reset' and amount == 0 or (op == 'refund' or op == 'grant') and amount >= 1 or
       op == 'settle' and amount >= 0)) or not ((tonumber(ARGV[3]) or 0) >= 1) then
  return redis.error_reply('ERR ratelimit: refused an adjustment of ' .. #KEYS .. ' keys and ' .. #ARGV ..
    ' arguments: this script takes 1 to 8 limits, one state key each, a record key, a 16-byte fingerprint,' ..
    ' reset (amount 0), refund or grant (a whole amount from 1 to 2^40), or settle (0 to 2^40)')
end

-- get (the prelude) reads each key, at most STATE or RECORD bytes.
local vals = {}
for k = 1, n do
  vals[k] = get(KEYS[k], STATE, STATE_AT)
end
local rec, odd = get(KEYS[n + 1], RECORD, RECORD_AT)
if odd then
  return redis.error_reply('ERR ratelimit: the record is of no shape this script writes')
end
local fp = ARGV[4]
-- reserved, since: a settlement's reservation, the cost it holds and when it was made.
local reserved, since = 0, 0
if rec and #rec == 24 + 24 * n then
  -- Done before: the same change gets its reply back; another is refused. Figures that are
  -- not whole numbers below 2^53 were not written here.
  if string.sub(rec, 1, 16) ~= fp then
    return redis.error_reply('ERR ratelimit: this record was made by another change (request id or settled cost)')
  end
  local out = {1}
  for k = 1, 3 * n + 1 do
    local x = struct.unpack('<d', rec, 9 + 8 * k)
    if not (x % 1 == 0 and x > -9007199254740992 and x < 9007199254740992) then
      return redis.error_reply('ERR ratelimit: the record is of no shape this script writes')
    end
    out[k + 1] = x
  end
  return out
elseif op == 'settle' and rec and #rec == 16 then
  reserved, since = struct.unpack('<dd', rec)
  if not (reserved >= 1 and reserved <= 1099511627776 and reserved % 1 == 0 and
      since >= 0 and since < 9007199254740992 and since % 1 == 0) then
    return redis.error_reply('ERR ratelimit: the record is of no shape this script writes')
  end
elseif op == 'settle' then
  return redis.error_reply('ERR ratelimit: no such reservation: never made for this caller and policy, expired, or settled a record ttl ago')
elseif rec then
  return redis.error_reply('ERR ratelimit: the record is of no shape this script writes')
end

{{template "now" .}}
-- A settlement is a charge of what the response cost beyond its reservation, an unreserve
-- of what it did not use (taken ago µs before now, by the Redis clock), or no change.
local ago = 0
if op == 'settle' then
  if amount > reserved then
    op, amount = 'charge', amount - reserved
  elseif amount < reserved then
    op, amount, ago = 'unreserve', reserved - amount, math.max(0, now - since)
  else
    op = 'exact'
  end
end
-- px: the state keys' PX, ARGV[2] unless a calendar window raises it (the body does).
local px = ARGV[2]
-- moves: what a denying check would rewrite; the adjustment writes every value it changes.
local moves
local cost = 0
local out = {0}
local changed = {}
for i = 1, n do
  local a, b = ARGV[4 + 2 * i] + 0, tonumber(ARGV[5 + 2 * i]) or ARGV[5 + 2 * i]
  -- adj: set true by the adjustment when it changed the state (vals[i]).
  local before, adj
  do
    -- The body's locals stay in scope for the adjustment: no block of its own here.
    local ok, r, retry, reset
    {{include "limit" . | indent 4}}
    before = r
    -- The body at cost 0 has read the state into its locals; the adjustment puts the new
    -- state into vals[i] and sets adj when it changes anything.
    if op ~= 'exact' then
      {{include "adjust" . | indent 6}}
    end
  end
  local ok, r, retry, reset
  do
    {{include "limit" . | indent 4}}
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
local done = {}
for k = 2, #out do
  done[k - 1] = struct.pack('<d', out[k])
end
out[#out + 1] = reserved
done[#done + 1] = struct.pack('<d', reserved)
redis.call('SET', KEYS[n + 1], fp .. table.concat(done), 'PX', ARGV[3])
return out
