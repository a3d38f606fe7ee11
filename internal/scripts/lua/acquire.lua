-- acquire: a check of a policy with a concurrency limit: the rate limits are checked and
-- debited as the check does ("fold"), and the request takes a slot (a request in flight),
-- all-or-nothing: a request its rate denies takes no slot, and a request refused a slot is
-- debited nothing.
--
-- The slots of one identity are counted, not listed, so that a call costs the same whatever
-- the number held: a ring of RING buckets by expiry, one string value of struct '>dd' per
-- bucket (the bucket's end, Redis-clock µs; the slots counted in it). A slot taken now with
-- a slot ttl of L is counted in the bucket ending at now + L rounded up to L / (RING - 2),
-- and held until that bucket ends: at most L / (RING - 2) past its ttl, never less. A slot
-- also has a key of its own, holding its bucket's place and end, so that only a slot taken
-- can be given back (the release script), once. A crashed sidecar's slots come back when their bucket
-- ends. Strings read with GETRANGE and written with SET, not a sorted set: a namespace's
-- Redis user needs no command beyond the check's, so it cannot build a structure whose
-- deletion would stall the server for every tenant.
--
-- KEYS[1..n]   the policy's state keys for the identity, all under one hash tag.
-- KEYS[n+1]    the identity's slots: the ring (same tag). A value of another shape counts
--              as no slot held and is overwritten; so is a bucket whose count is not a
--              whole number from 1 to 1000.
-- KEYS[n+2]    the slot's key (same tag, named after the slot's id): written on admission,
--              struct '>dd' (its bucket's place in the ring, 1 to RING; the bucket's end).
-- ARGV[1]      cost: what the request takes from every rate limit (a whole number >= 1).
-- ARGV[2]      ttl: PX in ms of the state keys written (a calendar window may raise it).
-- ARGV[3]      the most slots held at once (a whole number, 1 to 1000).
-- ARGV[4]      the slot ttl in ms (1000 to 86400000): a slot not given back by then expires.
-- ARGV[2i+3], ARGV[2i+4]  rate limit i: as the algorithm's check script takes it.
-- ARGV[last]   "keep", where the algorithm takes it: values are written at this T.
-- Reply        {code, retry_after_ms, reset_after_ms} as the check script's general path:
--              code = allowed + 4*index + 64*remaining, index n+1 naming the concurrency
--              limit (remaining: the slots left after this one; reset: the slot ttl). A
--              denial for want of a slot waits 1000 ms: a slot may come back at any moment.
--              {-1, now_us}: the server clock is outside a calendar window given.
-- Cost         O(n) in the number of rate limits (n <= 8), whatever the slots held: TIME,
--              one GETRANGE per state key and of the ring (512 bytes), the RING buckets
--              read once, n + 2 SETs; no key names built here.
-- Refused      any other shape (no rate limit or more than 8, KEYS and ARGV counts that do
--              not agree, a cost, most or slot ttl out of range, "keep" for an algorithm
--              that does not keep usage): an ERR reply before any read.
--
{{template "about" .}}

{{template "prelude" .}}

-- keeps: whether this algorithm keeps usage (takes "keep").
local keeps = {{.Keeps}}
local keep = ARGV[#ARGV] == 'keep'
local n = (#ARGV - 4 - (keep and 1 or 0)) / 2
local cost, most, life = tonumber(ARGV[1]), tonumber(ARGV[3]), tonumber(ARGV[4])
if n < 1 or n > 8 or n % 1 ~= 0 or #KEYS ~= n + 2 or (keep and not keeps) or
    not (cost and cost >= 1 and cost % 1 == 0 and cost < 9007199254740992) or
    not (most and most >= 1 and most <= 1000 and most % 1 == 0) or
    not (life and life >= 1000 and life <= 86400000 and life % 1 == 0) then
  return redis.error_reply('ERR ratelimit: refused an acquire of ' .. #KEYS .. ' keys and ' .. #ARGV ..
    ' arguments: this script takes 1 to 8 rate limits, one state key each, a slots key and a slot key,' ..
    ' a whole cost >= 1, 1 to 1000 slots and a slot ttl of 1000 to 86400000 ms')
end

-- get (the prelude) reads each key, at most STATE or SLOTS bytes.
local vals = {}
for k = 1, n do
  vals[k] = get(KEYS[k], STATE, STATE_AT)
end
vals[n + 1] = get(KEYS[n + 1], SLOTS, SLOTS_AT)
{{template "now" .}}
-- px: the keys' PX, ARGV[2] unless a calendar window raises it (the body does).
local px = ARGV[2]
local base = 3
{{template "fold" .}}

-- The rates admit: the request needs a slot as well. The ring is read in one unpack: the
-- slots held are the counts of the buckets not ended; the new slot goes in the bucket ending
-- where it ends, else in one ended or empty, else (the slot ttl changed: more bucket ends
-- than buckets) in the latest one, whose end then becomes the later of the two (its slots
-- held longer, never less).
if allowed then
  local v = vals[n + 1]
  local R = (v and #v == 16 * RING) and {struct.unpack(RINGFORMAT, v)} or {}
  local step = math.ceil(life * 1000 / (RING - 2))
  local ends = now + life * 1000
  ends = ends + (-ends) % step
  local held, exact, free, latest = 0, nil, nil, nil
  for k = 1, 2 * RING - 1, 2 do
    local e, c = R[k] or 0, R[k + 1] or 0
    if not (e > now and e < 9007199254740992 and c >= 1 and c <= 1000 and c % 1 == 0) then
      e, c = 0, 0
    end
    R[k], R[k + 1] = e, c
    held = held + c
    if c == 0 then
      free = free or k
    elseif e == ends then
      exact = k
    elseif not latest or e > R[latest] then
      latest = k
    end
  end
  if held >= most then
    allowed, idx, worst, rem, rst = false, n + 1, 1000000, 0, life * 1000
  else
    local k = exact or free or latest
    if ends > R[k] then
      R[k] = ends
    end
    R[k + 1] = R[k + 1] + 1
    local last = R[k]
    for j = 1, 2 * RING - 1, 2 do
      if R[j] > last then
        last = R[j]
      end
    end
    redis.call('SET', KEYS[n + 1], struct.pack(RINGFORMAT, unpack(R, 1, 2 * RING)), 'PX', string.format('%d', math.ceil((last - now) / 1000) + 1))
    -- The slot's own key: its bucket's place in the ring and end, until that end.
    redis.call('SET', KEYS[n + 2], struct.pack('>dd', (k + 1) / 2, R[k]), 'PX', string.format('%d', math.ceil((R[k] - now) / 1000) + 1))
    held = held + 1
    if most - held < rem then
      idx, rem, rst = n + 1, most - held, life * 1000
    end
  end
end

{{template "deny" .}}
{{template "commit" .}}
return {code, 0, rst}
