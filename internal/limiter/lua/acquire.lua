-- acquire.lua: a check of a policy with a concurrency limit: the rate limits are checked and
-- debited as the check script does, and the request takes a slot (a request in flight),
-- all-or-nothing: a request its rate denies takes no slot, and a request refused a slot is
-- debited nothing. The Go side composes one script per algorithm: this driver with the
-- algorithm's loop body (after its @body marker line) inlined at the @check marker.
--
-- The slots of one identity are one string value: a record of 40 bytes per slot held, its
-- expiry (struct '>d', Redis-clock µs) then its 32-byte id. A slot is given back by
-- release.lua when its request ends, or expires by itself (a crashed sidecar's slots come
-- back within the slot ttl). A string read with MGET and written with SET, not a sorted
-- set: a namespace's Redis user needs no command beyond the check's, so it cannot build a
-- structure whose deletion would stall the server for every tenant.
--
-- KEYS[1..n]   the policy's state keys for the identity, all under one hash tag.
-- KEYS[n+1]    the identity's slots (same tag). A value that is not whole records, or holds
--              more than 1000, counts as no slot held and is overwritten.
-- ARGV[1]      cost: what the request takes from every rate limit (a whole number >= 1).
-- ARGV[2]      ttl: PX in ms of the state keys written (a calendar window may raise it).
-- ARGV[3]      the slot id: 32 bytes, unique to the request.
-- ARGV[4]      the most slots held at once (a whole number, 1 to 1000).
-- ARGV[5]      the slot ttl in ms (1000 to 86400000): a slot not given back by then expires.
-- ARGV[2i+4], ARGV[2i+5]  rate limit i: as the algorithm's check script takes it.
-- ARGV[last]   "keep", where the algorithm takes it: values are written at this T.
-- Reply        {code, retry_after_ms, reset_after_ms} as the check script's general path:
--              code = allowed + 4*index + 64*remaining, index n+1 naming the concurrency
--              limit (remaining: the slots left after this one; reset: the slot ttl). A
--              denial for want of a slot waits 1000 ms: a slot may come back at any moment.
--              {-1, now_us}: the server clock is outside a calendar window given.
-- Cost         O(n + h): n <= 8 rate limits (TIME, one MGET, n SETs) and h <= 1000 slots
--              held, each read once (the expired dropped), one SET of the slots; no key
--              names built here.
-- Refused      any other shape (no rate limit or more than 8, KEYS and ARGV counts that do
--              not agree, a cost, slot id, most or slot ttl out of range, "keep" for an
--              algorithm that does not keep usage): an ERR reply before any read.

-- keeps: composed true by the Go side for the algorithms whose bodies read state through
-- keep_usage.lua (TokenBucket, GCRA), false for the others, which refuse 'keep'.
local keeps = false
local keep = ARGV[#ARGV] == 'keep'
local n = (#ARGV - 5 - (keep and 1 or 0)) / 2
local cost, slot, most, life = tonumber(ARGV[1]), ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
if n < 1 or n > 8 or n % 1 ~= 0 or #KEYS ~= n + 1 or (keep and not keeps) or
    not (cost and cost >= 1 and cost % 1 == 0 and cost < 9007199254740992) or #slot ~= 32 or
    not (most and most >= 1 and most <= 1000 and most % 1 == 0) or
    not (life and life >= 1000 and life <= 86400000 and life % 1 == 0) then
  return redis.error_reply('ERR ratelimit: refused an acquire of ' .. #KEYS .. ' keys and ' .. #ARGV ..
    ' arguments: this script takes 1 to 8 rate limits, one state key each, a slots key, a whole cost >= 1,' ..
    ' a slot id of 32 bytes, 1 to 1000 slots and a slot ttl of 1000 to 86400000 ms')
end

local vals = redis.call('MGET', unpack(KEYS))
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local allowed, idx, worst = true, 0, 0
-- px: the keys' PX, ARGV[2] unless a calendar window raises it (the body does).
local px = ARGV[2]
local rem, rst = -1, 0
-- moves: keep-usage values read at another T and rescaled, written even when denied.
local moves
for i = 1, n do
  local a, b = ARGV[4 + 2 * i] + 0, tonumber(ARGV[5 + 2 * i]) or ARGV[5 + 2 * i]
  local ok, r, retry, reset
  do
    -- @check
  end
  if not ok then
    if allowed or (worst >= 0 and (retry < 0 or retry > worst)) then
      idx, worst, rem, rst = i, retry, r, reset
    end
    allowed = false
  elseif allowed and (rem < 0 or r < rem) then
    idx, rem, rst = i, r, reset
  end
end

-- The rates admit: the request needs a slot as well. The slots still held are kept, the
-- expired ones (their request never said it ended) dropped.
if allowed then
  local held, v = {}, vals[n + 1]
  if v and #v % 40 == 0 and #v <= 40000 then
    for at = 1, #v, 40 do
      if struct.unpack('>d', v, at) > now then
        held[#held + 1] = string.sub(v, at, at + 39)
      end
    end
  end
  if #held >= most then
    allowed, idx, worst, rem, rst = false, n + 1, 1000000, 0, life * 1000
  else
    held[#held + 1] = struct.pack('>d', now + life * 1000) .. slot
    redis.call('SET', KEYS[n + 1], table.concat(held), 'PX', life)
    if most - #held < rem then
      idx, rem, rst = n + 1, most - #held, life * 1000
    end
  end
end

local code = 4 * idx + 64 * rem
rst = math.ceil(rst / 1000)
if not allowed then
  if worst > 0 then
    worst = math.ceil(worst / 1000)
  end
  if moves then
    for k, m in pairs(moves) do
      redis.call('SET', KEYS[k], m, 'PX', px)
    end
  end
  return {code, worst, rst}
end
for k = 1, n do
  if vals[k] then
    redis.call('SET', KEYS[k], vals[k], 'PX', px)
  end
end
return {code + 1, 0, rst}
