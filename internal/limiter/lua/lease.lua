-- lease.lua: the local tier. Takes a lease of up to k units for one identity, debited from
-- every limit at once exactly as one request of cost g (the granted units) would be, and
-- first returns what the caller's previous lease left unspent. The Go side composes one
-- script per algorithm: this driver with the algorithm's loop body (after its @body marker
-- line) inlined at the @check marker below. For TokenBucket and GCRA the state keys hold
-- either format of their check scripts (an integer, or struct '>dd' (time, T) written by
-- keep-usage; see keep_usage.lua): a lease reads both, like a check, and debits as the check
-- would with the same ARGV.
--
-- KEYS[1..n]   the policy's state keys for the identity, all under one hash tag.
-- KEYS[n+1]    the new lease's record (same tag): struct '<d' units leased, then '<ddd' per
--              limit (mark, a, b): the window number (windows) or the Redis time of the
--              lease's first cell (TokenBucket, GCRA), and the limit's two numbers. Written
--              only when a lease is granted, expiring when the lease cannot matter any more.
-- KEYS[n+2]    the previous lease's record, present only when ARGV[4] ~= "-1". A return
--              needs it: after a restart that lost it, or its expiry, nothing is returned
--              (units lost, never revived). It is consumed (set empty, expiring at once).
-- ARGV[1]      k: units wanted (0: only return the previous lease).
-- ARGV[2]      ttl in ms of the state keys written (>= the algorithm's horizon).
-- ARGV[3]      the fewest units worth a lease; fewer grantable grants nothing.
-- ARGV[4]      the index of the previous lease's first unspent unit (units are spent in
--              order; the ones before it are spent or past); "-1": no previous lease.
-- ARGV[5]      kind: "f" fixed window, "s" sliding window, "t" TokenBucket or GCRA.
-- ARGV[6]      share: a lease takes at most floor(available / share) units, so that other
--              sidecars keep the rest.
-- ARGV[2i+5], ARGV[2i+6]  limit i: as the algorithm's script (requests, period in µs or a
--              calendar window "start:end" in µs; or T in µs, burst). A calendar window is
--              recorded as (its end, requests, -1).
-- ARGV[last]   "keep", only for keep-usage and kind "t" (one argument more than the limits
--              need): a lease's debit is written as struct '>dd' (time, T), as the check
--              script writes it.
-- Reply        {granted, returned, left, off_1, ..., off_n} (only the first three when
--              nothing is granted); {-1, now_us} when the server clock is outside a calendar
--              window given (the previous lease is returned all the same; nothing is taken): left is what the tightest limit has left after the
--              lease; off_i is, for windows, the µs until
--              the window the lease was taken in ends (a unit is spent before it ends); for
--              TokenBucket and GCRA the µs until the start of the lease's first cell of
--              limit i: unit j may be spent only before off_i + j * T_i, so the tokens in
--              the bucket plus the unspent leased ones never exceed the burst.
-- Returning    windows: the count of the lease's window loses the unspent units, only while
--              that window is still the current one (never below 0, never another window).
--              TokenBucket, GCRA: the unspent cells still in the future leave the schedule:
--              full-at / TAT moves back by their span, never before now; in a '>dd' value
--              by their number of cells at the T the value records (a tier change since the
--              lease rescaled the debt), and the value keeps its format.
-- Cost         O(n) in the number of limits (n <= 8): TIME, one GETRANGE per key (at most
--              STATE or LEASE bytes, prelude.lua), at most 2n + 2 SETs;
--              no loops over data, no key names built here.
-- Refused      any other shape (no limit or more than 8, KEYS and ARGV counts that do not
--              agree, an unknown kind, a share below 1, "keep" for an algorithm that does
--              not keep usage or a kind other than "t"): an ERR reply before any read or
--              write, so the bound above holds whatever a caller sends.

-- keeps: composed true by the Go side for the algorithms whose bodies read state through
-- keep_usage.lua (TokenBucket, GCRA), false for the others, which refuse 'keep'.
local keeps = false
local keep = ARGV[#ARGV] == 'keep'
local n = (#ARGV - 6 - (keep and 1 or 0)) / 2
local kind = ARGV[5]
-- Refuse, before any loop, a call of a shape this script was not written for: 1 to 8
-- limits, one state key each, the new lease's record, and the previous one's exactly when
-- ARGV[4] names one; a known kind; a share of at least 1; 'keep' only where usage is kept.
-- Redis runs a script to its end on its single thread, so a caller that could make it loop
-- over a million "limits" would stall every client of the server.
if n < 1 or n > 8 or n % 1 ~= 0 or #KEYS ~= n + (ARGV[4] == '-1' and 1 or 2) or
    (kind ~= 'f' and kind ~= 's' and kind ~= 't') or not ((tonumber(ARGV[6]) or 0) >= 1) or
    (keep and not (keeps and kind == 't')) then
  return redis.error_reply('ERR ratelimit: refused a lease call of ' .. #KEYS .. ' keys and ' .. #ARGV ..
    ' arguments: this script takes 1 to 8 limits, one state key each')
end
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
-- px: the state keys' PX, ARGV[2] unless a calendar window raises it (the body does).
local px = ARGV[2]
-- get (prelude.lua) reads each key, at most STATE or LEASE bytes: false (fresh state, no
-- record) for a key of another type or a value longer than any of ours.
local vals = {}
for k = 1, n do
  vals[k] = get(KEYS[k], STATE)
end
for k = n + 1, #KEYS do
  vals[k] = get(KEYS[k], LEASE)
end

-- Return the previous lease's unspent units.
local returned = 0
local rec = vals[n + 2]
-- A record of another size, or leasing other than a whole number of units from 1 to 2^40,
-- is none: nothing is returned, and it stays as it is.
local leased = rec and #rec == 8 + 24 * n and struct.unpack('<d', rec)
if ARGV[4] ~= '-1' and leased and leased >= 1 and leased <= 1099511627776 and leased % 1 == 0 then
  redis.call('SET', KEYS[n + 2], '', 'PX', 1)
  local next = math.min(math.max(tonumber(ARGV[4]) or leased, 0), leased)
  for i = 1, n do
    local mark, ra, rb = struct.unpack('<ddd', rec, 9 + 24 * (i - 1))
    -- A calendar window ('start:end') is recorded as b = -1: its mark is its end.
    local a, b = ARGV[5 + 2 * i] + 0, tonumber(ARGV[6 + 2 * i]) or -1
    local v = vals[i]
    -- The limit must be the one the lease was taken under (an edit changes a or b), and
    -- the mark a whole number of µs or windows below 2^53 (a record of ours).
    if ra == a and rb == b and v and mark >= 0 and mark < 9007199254740992 and mark % 1 == 0 then
      local m = leased - next
      if kind == 'f' and #v == 16 then
        local w, c = struct.unpack('<dd', v)
        local current = b > 0 and math.floor(now / b) == mark or b < 0 and now < mark
        -- A count of 0 or below (a reset or a grant since, adjust.lua) takes nothing back:
        -- a return never adds to a grant, nor undoes a reset.
        if w == mark and current and m > 0 and c > 0 then
          vals[i] = struct.pack('<dd', w, math.max(0, c - m))
          redis.call('SET', KEYS[i], vals[i], 'KEEPTTL')
          returned = math.max(returned, math.min(m, c))
        end
      elseif kind == 's' and #v == 24 then
        local w, p, c = struct.unpack('<ddd', v)
        if w == mark and math.floor(now / b) == mark and m > 0 and c > 0 then
          vals[i] = struct.pack('<ddd', w, p, math.max(0, c - m))
          redis.call('SET', KEYS[i], vals[i], 'KEEPTTL')
          returned = math.max(returned, math.min(m, c))
        end
      elseif kind == 't' then
        -- Only cells not yet started can leave: cell j starts at mark + j * a.
        local past = math.ceil((now - mark) / a)
        m = leased - math.max(next, past)
        -- An integer is at this T (a); a '>dd' value at the T it records.
        local tat, T0, packed = tonumber(v), a, false
        if not tat and #v == 16 then
          tat, T0 = struct.unpack('>dd', v)
          packed = true
        end
        if m > 0 and tat and tat > now and T0 >= 1 then
          vals[i] = math.max(now, tat - m * T0)
          if packed then
            vals[i] = struct.pack('>dd', vals[i], T0)
          end
          redis.call('SET', KEYS[i], vals[i], 'KEEPTTL')
          returned = math.max(returned, m)
        end
      end
    end
  end
end

local want = tonumber(ARGV[1])
if want < 1 then
  return {0, returned, 0}
end
-- A grant's credit (a 32-byte TokenBucket or GCRA value, see adjust.lua) is spent by checks
-- only, never leased: while one lasts, no lease (checks go to Redis one by one), and a
-- lease's cells are always the bucket's, so a return gives back only what it took.
if kind == 't' then
  for i = 1, n do
    if type(vals[i]) == 'string' and #vals[i] == 32 then
      return {0, returned, 0}
    end
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
-- moves: keep-usage values the bodies read at another T, rescaled to this one, written when
-- nothing is granted (as a denied check writes them); a grant writes every limit anyway. A
-- value whose debt was capped at the limit's burst is not among them (it keeps the whole
-- debt, see keep_usage.lua); no grant of a unit or more can follow such a read (its bucket
-- is empty).
local moves
for pass = 1, 2 do
  avail = math.huge
  local allowed = true
  for i = 1, n do
    local a, b = ARGV[5 + 2 * i] + 0, tonumber(ARGV[6 + 2 * i]) or ARGV[6 + 2 * i]
    local ok, r, retry, reset
    do
      -- @check
    end
    if ok then
      avail = math.min(avail, r + cost)
      if kind == 's' then
        offs[i] = reset - b
      elseif kind == 't' then
        offs[i] = reset - cost * a
      else
        offs[i] = reset
      end
    else
      allowed = false
      avail = math.min(avail, r)
    end
  end
  local fair = math.floor(avail / tonumber(ARGV[6]))
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

-- The record lives as long as a return can matter: to the end of the lease's window, or
-- to the start of its last cell.
local out, life = {struct.pack('<d', granted)}, 0
for i = 1, n do
  local a, b = ARGV[5 + 2 * i] + 0, tonumber(ARGV[6 + 2 * i])
  redis.call('SET', KEYS[i], vals[i], 'PX', px)
  local mark, upto = 0, offs[i]
  if kind == 't' then
    mark, upto = now + offs[i], offs[i] + granted * a
  elseif b then
    mark = math.floor(now / b)
  else
    -- A calendar window: its end, now + the µs left in it; recorded as b = -1.
    mark, b = now + offs[i], -1
  end
  out[i + 1] = struct.pack('<ddd', mark, a, b)
  life = math.max(life, upto)
end
redis.call('SET', KEYS[n + 1], table.concat(out), 'PX', math.floor(life / 1000) + 2)
local reply = {granted, returned, avail - granted}
for i = 1, n do
  reply[i + 3] = offs[i]
end
return reply
