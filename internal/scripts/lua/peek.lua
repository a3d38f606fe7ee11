-- peek: a check that writes nothing. It reads each limit's state as a check would, reports
-- what each limit holds now, and decides a request of the given cost as the check would
-- decide it at this instant, and then discards everything: no SET, no PEXPIRE, no
-- idempotency record, no lease, so 10,000 peeks leave Redis as they found it.
--
-- KEYS[1..n]   the policy's state keys for the identity, all under one hash tag (no
--              idempotency key: a peek records nothing).
-- KEYS[n+1]    optional: the identity's concurrency slots (acquire's ring), for a policy with
--              a concurrency limit: the reply then ends with the slots held.
-- ARGV         exactly a check's ARGV without an idempotency key: ARGV[1] the cost to decide
--              (a whole number >= 0; 0 decides nothing and only reads), ARGV[2] the keys' ttl
--              (unused: nothing is written), ARGV[3] "0", then limit i in ARGV[2i+2],
--              ARGV[2i+3], then "keep" where the algorithm takes it (read as the check reads;
--              nothing is rewritten).
-- Reply        {allowed, index, retry_after_ms, r_1, reset_1, retry_1, ..., r_n, reset_n,
--              retry_n}: allowed 1 when a request of the cost would be admitted now; index
--              the reported limit (the denying one that waits longest when denied, else the
--              one with the least remaining), 1-based; then per limit what remains now
--              (before the request), the ms until it is full again (for windows, until the
--              window that holds the usage ends), and the ms a request of the cost would
--              wait (0: admitted now, -1: never). Times are whole ms, rounded up. With the
--              slots key, one more element: the slots held now. {-1, now_us}: the server
--              clock is outside a calendar window given, as the check answers it.
-- Cost         O(n) in the number of limits (n <= 8): TIME, one GETRANGE per key (the slots'
--              ring: its RING buckets read in one unpack), each "limit" run twice; no
--              writes, no key names built here.
-- Refused      any other shape (no limit or more than 8, KEYS and ARGV counts that do not
--              agree, an idempotency ttl, a cost that is not a whole number >= 0, "keep"
--              where usage is not kept): an ERR reply before any read.
--
{{template "about" .}}

{{template "prelude" .}}

-- keeps: whether this algorithm keeps usage (takes "keep").
local keeps = {{.Keeps}}
local keep = ARGV[#ARGV] == 'keep'
local n = (#ARGV - 3 - (keep and 1 or 0)) / 2
local want = tonumber(ARGV[1])
local slots = #KEYS == n + 1
if n < 1 or n > 8 or n % 1 ~= 0 or (#KEYS ~= n and not slots) or ARGV[3] ~= '0' or (keep and not keeps) or
    not (want and want >= 0 and want % 1 == 0 and want < 9007199254740992) then
  return redis.error_reply('ERR ratelimit: refused a peek of ' .. #KEYS .. ' keys and ' .. #ARGV ..
    ' arguments: this script takes 1 to 8 limits, one state key each, no idempotency key and a whole cost >= 0')
end

{{template "now" .}}
-- px: what the bodies would set as PX; read by a calendar window, never used here.
local px = ARGV[2]
-- moves: what a denying check would rewrite (keep-usage values read at another rate); a
-- peek rewrites nothing.
local moves
local vals = {}
for k = 1, n do
  vals[k] = get(KEYS[k], STATE, STATE_AT)
end
local out = {1, 0, 0}
local idx, worst, least = 0, 0, -1
for i = 1, n do
  local a, b = ARGV[2 + 2 * i] + 0, tonumber(ARGV[3 + 2 * i]) or ARGV[3 + 2 * i]
  local stored = vals[i]
  -- Pass 1 at cost 0: what the limit holds now. Pass 2 at the cost: the decision. "limit"
  -- replaces vals[i] when it admits; each pass starts from the stored value.
  local held, full, wait
  for pass = 1, 2 do
    vals[i] = stored
    local cost = pass == 1 and 0 or want
    local ok, r, retry, reset
    do
      {{include "limit" . | indent 6}}
    end
    if pass == 1 then
      held, full = r, reset
    elseif ok then
      wait = 0
    else
      wait = retry
    end
  end
  if held < 0 then
    held = 0
  end
  if wait > 0 then
    wait = math.ceil(wait / 1000)
  end
  out[1 + 3 * i], out[2 + 3 * i], out[3 + 3 * i] = held, math.ceil(full / 1000), wait
  if wait ~= 0 then
    -- The limit that must wait longest names the denial; -1 (never) outranks any wait.
    if out[1] == 1 or (worst >= 0 and (wait < 0 or wait > worst)) then
      idx, worst = i, wait
    end
    out[1] = 0
  elseif out[1] == 1 and (least < 0 or held < least) then
    idx, least = i, held
  end
end
out[2], out[3] = idx, out[1] == 1 and 0 or worst
if slots then
  -- The slots held are the counts of the ring's buckets not ended (acquire); a value of
  -- another shape holds none.
  local v, held = get(KEYS[n + 1], SLOTS, SLOTS_AT), 0
  if v and #v == 16 * RING then
    local R = {struct.unpack(RINGFORMAT, v)}
    for k = 1, 2 * RING - 1, 2 do
      local e, c = R[k], R[k + 1]
      if e > now and e < 9007199254740992 and c >= 1 and c <= 1000 and c % 1 == 0 then
        held = held + c
      end
    end
  end
  out[#out + 1] = held
end
return out
