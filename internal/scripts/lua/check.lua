-- check: every limit of a policy checked and debited at once, all-or-nothing (a request one
-- limit denies is debited by none), in one call that reads the Redis clock. What a limit's
-- state and two numbers are is the algorithm's (below).
--
-- KEYS[1..n]   one state key per limit, all under one hash tag.
-- KEYS[n+1]    the idempotency key, present only when ARGV[3] ~= "0".
-- ARGV[1]      cost: what the request takes from every limit (a whole number >= 1).
-- ARGV[2]      ttl: PX in ms set on every state key written (>= the algorithm's horizon; a
--              calendar window may raise it).
-- ARGV[3]      idempotency ttl in ms; "0" = no idempotency key.
-- ARGV[4], ARGV[5]  only when ARGV[3] ~= "0": the request's fingerprint (16 bytes) and the
--              most times its id may replay the first decision; the limits follow, from
--              ARGV[2i+4]. A replay needs the same fingerprint; another request under a
--              seen id, or one replay beyond the bound, is checked as a new request.
-- ARGV[2i+2], ARGV[2i+3]  limit i: the algorithm's two numbers.
-- ARGV[last]   "keep", only where the algorithm keeps usage (a bucket): every state written
--              records the rate it was written at.
-- Reply        code = allowed(1) + 2*replayed + 4*limit index + 64*remaining: the tightest
--              limit's index and remaining when allowed, the denying limit's when denied;
--              reset_after is until that limit is full again (a window: until it ends), and
--              retry_after -1 means never (the cost is more than the limit holds). A fresh
--              admission with remaining < 2^20 and reset_after < 2^27 ms replies with one
--              integer, code + 2^26 * reset_after_ms; every other reply is
--              {code, retry_after_ms, reset_after_ms}. A denial writes nothing but the
--              keep-usage values it read at another rate (rescaled, nothing debited).
--              {-1, now_us}: the server clock is outside a calendar window given; nothing
--              was read or written.
-- Cost         O(n) in the number of limits (n <= 8): TIME, one GETRANGE per key (at most
--              STATE or REPLAY bytes), at most n + 1 SETs; no loops over data, no key names
--              built here.
-- Refused      any other shape (no limit or more than 8, KEYS and ARGV counts that do not
--              agree, a fingerprint that is not 16 bytes, "keep" where usage is not kept):
--              an ERR reply before any read or write.
--
{{template "about" .}}

{{template "prelude" .}}

{{template "check" .}}

{{- define "check" -}}
-- keeps: whether this algorithm keeps usage (takes "keep").
local keeps = {{.Keeps}}
local cost = ARGV[1] == '1' and 1 or tonumber(ARGV[1])
local idem = ARGV[3] ~= '0'
-- An idempotent call has two more arguments before the limits: the fingerprint and the bound.
local off = idem and 2 or 0
local keep = ARGV[#ARGV] == 'keep'
local n = (#ARGV - 3 - off - (keep and 1 or 0)) / 2
-- Refuse, before any loop, a call of a shape this script was not written for. Redis runs a
-- script to its end on its single thread: a caller that could make it loop over a million
-- "limits" would stall every client of the server.
if n < 1 or n > 8 or n % 1 ~= 0 or #KEYS ~= n + (idem and 1 or 0) or (idem and #ARGV[4] ~= 16) or
    (keep and not keeps) then
  return redis.error_reply('ERR ratelimit: refused a call of ' .. #KEYS .. ' keys and ' .. #ARGV ..
    ' arguments: this script takes 1 to 8 limits, one state key each' .. (keeps and '' or ', and no keep-usage'))
end

local vals = {}
for k = 1, n do
  vals[k] = get(KEYS[k], STATE, STATE_AT)
end

-- A request id seen before with the same request (fingerprint) gets its first, admitting
-- decision back and debits nothing, at most ARGV[5] times; the record is struct '<ddd'
-- (code, reset_after_ms, replays so far) followed by the fingerprint. Another request under
-- the id, or one replay too many, is checked as a new request below, and the record stays
-- as it is (SET NX). A record of another shape is none: its figures must be whole numbers
-- below 2^53, the code an admission's (allowed, not replayed, a limit index from 1 to n),
-- so that no value a tenant writes comes back as a reply no check gives.
local fp = ARGV[4]
if idem then
  local seen = get(KEYS[n + 1], REPLAY, REPLAY_AT)
  if seen and #seen == 24 + #fp and string.sub(seen, 25) == fp then
    local code, rst, replays = struct.unpack('<ddd', seen)
    local index = (code - code % 4) / 4 % 16
    if code % 4 == 1 and code >= 5 and code < 9007199254740992 and index >= 1 and index <= n and
        rst >= 0 and rst < 9007199254740992 and rst % 1 == 0 and
        replays >= 0 and replays % 1 == 0 and replays < tonumber(ARGV[5]) then
      redis.call('SET', KEYS[n + 1], struct.pack('<ddd', code, rst, replays + 1) .. fp, 'KEEPTTL')
      return {code + 2, 0, rst}
    end
  end
end

{{template "now" .}}
-- px: the keys' PX, ARGV[2] unless a calendar window raises it.
local px = ARGV[2]
local base = off + 2
{{template "fold" .}}
{{template "deny" .}}
{{template "commit" .}}
if idem then
  redis.call('SET', KEYS[n + 1], struct.pack('<ddd', code, rst, 0) .. fp, 'PX', ARGV[3], 'NX')
end
-- An admission whose figures fit answers with one integer, code + 2^26 * reset_after_ms
-- (< 2^53, exact in a double): no table to build and convert.
if rem < 1048576 and rst < 134217728 then
  return code + 67108864 * rst
end
return {code, 0, rst}
{{- end}}
