-- driver.lua: the part every limiter script shares. The Go side composes each script as the
-- algorithm file's header and this driver with the algorithm's two bodies inlined: its single-limit body (after its @single marker line) at the @single
-- marker below, its loop body (after its @body marker line) at the @check marker. The
-- protocol (KEYS, ARGV, reply) is documented in each algorithm file's header. Kept lean on
-- purpose: every number parsed, function called and table allocated costs Redis main-thread
-- time on every call, so the bodies run inline, new state is written back into vals, and an
-- admission answers with one integer, not a table.

-- keeps says whether this script was written for the keep-usage shape (ARGV ending in
-- 'keep', see the algorithm file's header): the Go side composes it true for the algorithms
-- whose bodies read state through keep_usage.lua (TokenBucket, GCRA), false for the others,
-- which refuse that shape.
local keeps = false

-- The common call, one limit and no idempotency key, takes a path of its own: no loop, no
-- vals, no unpack, no math.* calls (but where keep-usage meets a changed rate). It returns
-- from inside the block, and must decide and write exactly as the general path below does
-- for n = 1 (scriptcost_test.go and keepusage_test.go check both against one model). A
-- keep-usage call has one argument more, 'keep'.
if (#ARGV == 5 or keeps and #ARGV == 6 and ARGV[6] == 'keep') and ARGV[3] == '0' and #KEYS == 1 then
  local keep = #ARGV == 6
  local t = redis.call('TIME')
  local now = t[1] * 1000000 + t[2]
  -- get (prelude.lua): at most STATE bytes, false for a key of another type or a value
  -- longer than any state of ours (fresh state, overwritten by the next admission).
  local v = get(KEYS[1], STATE)
  local cost = ARGV[1] == '1' and 1 or tonumber(ARGV[1])
  local a, b = ARGV[4] + 0, tonumber(ARGV[5]) or ARGV[5]
  -- The body decides: new is the state to write when it admits (nil denies), r what remains,
  -- rs the reset in whole ms, and, when it denies, retry the wait in whole ms (-1: never) and
  -- moved, a state to write all the same (a keep-usage value read at another T, rescaled
  -- and not capped).
  local new, r, retry, rs, moved
  -- px: the keys' PX, ARGV[2] unless a calendar window raises it.
  local px = ARGV[2]
  -- @single
  if new then
    redis.call('SET', KEYS[1], new, 'PX', px)
    if r < 1048576 and rs < 134217728 then
      return 5 + 64 * r + 67108864 * rs
    end
    return {5 + 64 * r, 0, rs}
  end
  if moved then
    redis.call('SET', KEYS[1], moved, 'PX', px)
  end
  return {4 + 64 * r, retry, rs}
end

local cost = ARGV[1] == '1' and 1 or tonumber(ARGV[1])
local idem = ARGV[3] ~= '0'
-- An idempotent call has two more arguments before the limits: the request's fingerprint
-- and the replay bound.
local off = idem and 2 or 0
-- A keep-usage call ends with 'keep', after the limits.
local keep = ARGV[#ARGV] == 'keep'
local n = (#ARGV - 3 - off - (keep and 1 or 0)) / 2
local nstate = n -- one state key per limit

-- Refuse, before any loop, a call of a shape this script was not written for: 1 to 8
-- limits, one state key each, the idempotency key exactly when ARGV[3] says so, a 16-byte
-- fingerprint, 'keep' only when the algorithm keeps usage. Redis runs a script to its end on
-- its single thread, so a caller that could make it loop over a million "limits" would stall
-- every client of the server.
if n < 1 or n > 8 or n % 1 ~= 0 or #KEYS ~= nstate + (idem and 1 or 0) or (idem and #ARGV[4] ~= 16) or
    (keep and not keeps) then
  return redis.error_reply('ERR ratelimit: refused a call of ' .. #KEYS .. ' keys and ' .. #ARGV ..
    ' arguments: this script takes 1 to 8 limits, one state key each' .. (keeps and '' or ', and no keep-usage'))
end

-- Every state key and, when present, the idempotency key (KEYS holds exactly those, at most
-- 9 after the check above), each read with get (prelude.lua): at most STATE and REPLAY
-- bytes, false for a key of another type or a value longer than any of ours.
local vals = {}
for k = 1, nstate do
  vals[k] = get(KEYS[k], STATE)
end
if idem then
  vals[nstate + 1] = get(KEYS[nstate + 1], REPLAY)
end

-- A request id seen before with the same request (fingerprint) gets its first, admitting
-- decision back and debits nothing, at most ARGV[5] times; the record is
-- struct '<ddd' (code, reset_after_ms, replays so far) followed by the fingerprint. Another
-- request under the id, or one replay too many, is checked as a new request below, and the
-- record stays as it is (SET NX). A record of another shape is none: its figures must be
-- whole numbers below 2^53, the code an admission's (allowed, not replayed, a limit index
-- from 1 to n), so that no value a tenant writes comes back as a reply no check gives.
local fp = ARGV[4]
if idem then
  local seen = vals[nstate + 1]
  if seen and #seen == 24 + #fp and string.sub(seen, 25) == fp then
    local code, rst, replays = struct.unpack('<ddd', seen)
    local index = (code - code % 4) / 4 % 16
    if code % 4 == 1 and code >= 5 and code < 9007199254740992 and index >= 1 and index <= nstate and
        rst >= 0 and rst < 9007199254740992 and rst % 1 == 0 and
        replays >= 0 and replays % 1 == 0 and replays < tonumber(ARGV[5]) then
      redis.call('SET', KEYS[nstate + 1], struct.pack('<ddd', code, rst, replays + 1) .. fp, 'KEEPTTL')
      return {code + 2, 0, rst}
    end
  end
end

local t = redis.call('TIME')
-- Arithmetic coerces the numeric strings itself, a function call cheaper than tonumber.
local now = t[1] * 1000000 + t[2]
local allowed, idx, worst = true, 0, 0
-- px: the keys' PX, ARGV[2] unless a calendar window raises it.
local px = ARGV[2]
local rem, rst = -1, 0
-- moves: the keep-usage values the bodies read at another T and rescaled to this one without
-- capping (index -> value), written even when the call denies; nil when none.
local moves
for i = 1, n do
  local a, b = ARGV[off + 2 + 2 * i] + 0, tonumber(ARGV[off + 3 + 2 * i]) or ARGV[off + 3 + 2 * i]
  -- The body sets these; on admission it also puts the new state into vals (and false for a
  -- key it leaves alone).
  local ok, r, retry, reset
  do
    -- @check
  end
  if not ok then
    -- The limit that must wait longest names the denial; -1 (never) outranks any wait.
    if allowed or (worst >= 0 and (retry < 0 or retry > worst)) then
      idx, worst, rem, rst = i, retry, r, reset
    end
    allowed = false
  elseif allowed and (rem < 0 or r < rem) then
    idx, rem, rst = i, r, reset
  end
end

-- code = allowed + 2*replayed + 4*index of the reported limit (the tightest when allowed,
-- the denying one when denied) + 64*remaining. Times leave in whole milliseconds, rounded
-- up; -1 stays "never".
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
-- All limits admit: write every new state (all-or-nothing).
for k = 1, nstate do
  if vals[k] then
    redis.call('SET', KEYS[k], vals[k], 'PX', px)
  end
end
code = code + 1
if idem then
  redis.call('SET', KEYS[nstate + 1], struct.pack('<ddd', code, rst, 0) .. fp, 'PX', ARGV[3], 'NX')
end
-- An admission whose figures fit answers with one integer, code + 2^26 * reset_after_ms
-- (< 2^53, exact in a double): no table to build and convert.
if rem < 1048576 and rst < 134217728 then
  return code + 67108864 * rst
end
return {code, 0, rst}
