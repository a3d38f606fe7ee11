-- lease: the local tier. Takes a lease of up to k units for one identity, debited from every
-- limit at once exactly as one request of cost g (the granted units) would be ("limit"), and
-- first returns what the caller's previous lease left unspent ("unlease"). The state keys
-- hold any format of the check's: a lease reads them as a check does, and debits as the
-- check would with the same ARGV.
--
-- KEYS[1..n]   the policy's state keys for the identity, all under one hash tag.
-- KEYS[n+1]    the new lease's record (same tag): struct '<d' units leased, then '<ddd' per
--              limit (mark, a, b): the algorithm's mark ("mark": a window's number or end, a
--              bucket's first cell) and the limit's two numbers. Written only when a lease is
--              granted, expiring when the lease cannot matter any more.
-- KEYS[n+2]    the previous lease's record, present only when ARGV[4] ~= "-1". A return
--              needs it: after a restart that lost it, or its expiry, nothing is returned
--              (units lost, never revived). It is consumed (set empty, expiring at once).
-- ARGV[1]      k: units wanted (0: only return the previous lease).
-- ARGV[2]      ttl in ms of the state keys written (>= the algorithm's horizon).
-- ARGV[3]      the fewest units worth a lease; fewer grantable grants nothing.
-- ARGV[4]      the index of the previous lease's first unspent unit (units are spent in
--              order; the ones before it are spent or past); "-1": no previous lease.
-- ARGV[5]      share: a lease takes at most floor(available / share) units, so that other
--              sidecars keep the rest.
-- ARGV[2i+4], ARGV[2i+5]  limit i: the algorithm's two numbers, as the check takes them. A
--              calendar window is recorded as (its end, requests, -1).
-- ARGV[last]   "keep", only where the algorithm keeps usage: a lease's debit records the
--              rate it was written at, as the check writes it.
-- Reply        {granted, returned, left, off_1, ..., off_n} (only the first three when
--              nothing is granted): left is what the tightest limit has left after the
--              lease; off_i the algorithm's offset ("offset") of limit i. {-1, now_us} when
--              the server clock is outside a calendar window given (the previous lease is
--              returned all the same; nothing is taken).
-- Cost         O(n) in the number of limits (n <= 8): TIME, one GETRANGE per key (at most
--              STATE or LEASE bytes), at most 2n + 2 SETs; no loops over data, no key names
--              built here.
-- Refused      any other shape (no limit or more than 8, KEYS and ARGV counts that do not
--              agree, a share below 1, "keep" where usage is not kept): an ERR reply before
--              any read or write, so the bound above holds whatever a caller sends.
--
{{template "about" .}}

{{template "prelude" .}}

-- keeps: whether this algorithm keeps usage (takes "keep").
local keeps = {{.Keeps}}
local keep = ARGV[#ARGV] == 'keep'
local n = (#ARGV - 5 - (keep and 1 or 0)) / 2
-- Refuse, before any loop, a call of a shape this script was not written for: 1 to 8
-- limits, one state key each, the new lease's record, and the previous one's exactly when
-- ARGV[4] names one; a share of at least 1; 'keep' only where usage is kept.
if n < 1 or n > 8 or n % 1 ~= 0 or #KEYS ~= n + (ARGV[4] == '-1' and 1 or 2) or
    not ((tonumber(ARGV[5]) or 0) >= 1) or (keep and not keeps) then
  return redis.error_reply('ERR ratelimit: refused a lease call of ' .. #KEYS .. ' keys and ' .. #ARGV ..
    ' arguments: this script takes 1 to 8 limits, one state key each')
end
{{template "now" .}}
-- px: the state keys' PX, ARGV[2] unless a calendar window raises it (the body does).
local px = ARGV[2]
local vals = {}
for k = 1, n do
  vals[k] = get(KEYS[k], STATE, STATE_AT)
end

-- Return the previous lease's unspent units. A record of another size, or leasing other than
-- a whole number of units from 1 to 2^40, is none: nothing is returned, and it stays.
local returned = 0
local rec = ARGV[4] ~= '-1' and get(KEYS[n + 2], LEASE, LEASE_AT)
local leased = rec and #rec == 8 + 24 * n and struct.unpack('<d', rec)
if leased and leased >= 1 and leased <= 1099511627776 and leased % 1 == 0 then
  redis.call('SET', KEYS[n + 2], '', 'PX', '1')
  local next = math.min(math.max(tonumber(ARGV[4]) or leased, 0), leased)
  for i = 1, n do
    local mark, ra, rb = struct.unpack('<ddd', rec, 9 + 24 * (i - 1))
    -- A calendar window ('start:end') is recorded as b = -1: its mark is its end.
    local a, b = ARGV[4 + 2 * i] + 0, tonumber(ARGV[5 + 2 * i]) or -1
    local v = vals[i]
    -- The limit must be the one the lease was taken under (an edit changes a or b), and
    -- the mark a whole number of µs or windows below 2^53 (a record of ours).
    if ra == a and rb == b and v and mark >= 0 and mark < 9007199254740992 and mark % 1 == 0 then
      local m = leased - next
      {{include "unlease" . | indent 6}}
    end
  end
end

local want = tonumber(ARGV[1])
if want < 1 then
  return {0, returned, 0}
end
-- A grant's credit (a 32-byte bucket state) is spent by checks only, never leased: while one
-- lasts, no lease (checks go to Redis one by one), and a lease's cells are always the
-- bucket's, so a return gives back only what it took. No window's state is 32 bytes.
for i = 1, n do
  if type(vals[i]) == 'string' and #vals[i] == 32 then
    return {0, returned, 0}
  end
end

-- Take: pass 1 asks for want units; pass 2, if that is more than the share of what every
-- limit has, asks for the share.
local orig = {}
for i = 1, n do
  orig[i] = vals[i]
end
local offs = {}
local cost = want
local granted, avail = 0, 0
-- moves: keep-usage values "limit" read at another rate, rescaled to this one, written when
-- nothing is granted (as a denied check writes them); a grant writes every limit anyway. A
-- value whose debt was capped at the limit's burst is not among them (it keeps the whole
-- debt); no grant of a unit or more can follow such a read (its bucket is empty).
local moves
for pass = 1, 2 do
  avail = math.huge
  local allowed = true
  for i = 1, n do
    local a, b = ARGV[4 + 2 * i] + 0, tonumber(ARGV[5 + 2 * i]) or ARGV[5 + 2 * i]
    local ok, r, retry, reset
    do
      {{include "limit" . | indent 6}}
    end
    if ok then
      avail = math.min(avail, r + cost)
      {{include "offset" . | indent 6}}
    else
      allowed = false
      avail = math.min(avail, r)
    end
  end
  local fair = math.floor(avail / tonumber(ARGV[5]))
  if allowed and cost <= fair then
    granted = cost
    break
  end
  if pass == 2 or fair < tonumber(ARGV[3]) then
    if moves then
      for k, m in pairs(moves) do
        redis.call('SET', KEYS[k], m, 'PX', px)
      end
    end
    return {0, returned, math.max(avail, 0)}
  end
  cost = fair
  for i = 1, n do
    vals[i] = orig[i]
  end
end

-- The record lives as long as a return can matter ("mark": to the end of the lease's
-- window, or to the start of its last cell).
local out, life = {struct.pack('<d', granted)}, 0
for i = 1, n do
  local a, b = ARGV[4 + 2 * i] + 0, tonumber(ARGV[5 + 2 * i])
  redis.call('SET', KEYS[i], vals[i], 'PX', px)
  local mark, upto = 0, offs[i]
  {{include "mark" . | indent 2}}
  out[i + 1] = struct.pack('<ddd', mark, a, b)
  life = math.max(life, upto)
end
redis.call('SET', KEYS[n + 1], table.concat(out), 'PX', string.format('%d', math.floor(life / 1000) + 2))
local reply = {granted, returned, avail - granted}
for i = 1, n do
  reply[i + 3] = offs[i]
end
return reply
