-- driver.lua: the part every limiter script shares. The Go side appends it to an algorithm
-- file, which defines KEYS_PER_LIMIT and check(); the protocol (KEYS, ARGV, reply) is
-- documented in each algorithm file's header.
local cost = tonumber(ARGV[1])
local ttl = ARGV[2]
local idem_ttl = tonumber(ARGV[3])
local n = (#ARGV - 3) / 3
local nstate = n * KEYS_PER_LIMIT

-- One MGET reads every state key and, when present, the idempotency key.
local idem = idem_ttl > 0
local vals = redis.call('MGET', unpack(KEYS, 1, idem and nstate + 1 or nstate))

-- A request id seen before gets its first (admitting) decision back and debits nothing.
if idem then
  local seen = vals[nstate + 1]
  if seen and #seen == 24 then
    local rem, lim, rst = struct.unpack('<ddd', seen)
    return {1, rem, lim, 0, rst, 0, 1}
  end
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local writes = {}
local allowed, deny, worst = 1, 0, 0
local rem, lim, rst = -1, 0, 0
for i = 1, n do
  local a = 3 * i + 1
  local ok, r, l, retry, reset = check(i, vals, now, cost,
    tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), writes)
  if not ok then
    -- The limit that must wait longest names the denial; -1 (never) outranks any wait.
    if allowed == 1 or (worst >= 0 and (retry < 0 or retry > worst)) then
      deny, worst, rem, lim, rst = i, retry, r, l, reset
    end
    allowed = 0
  elseif allowed == 1 and (rem < 0 or r < rem) then
    rem, lim, rst = r, l, reset
  end
end

-- Times leave in whole milliseconds, rounded up; -1 stays "never".
local rst_ms = math.ceil(rst / 1000)
if allowed == 0 then
  if worst > 0 then
    worst = math.ceil(worst / 1000)
  end
  return {0, rem, lim, worst, rst_ms, deny, 0}
end
-- All limits admit: debit every one of them (all-or-nothing).
for j = 1, #writes, 2 do
  redis.call('SET', writes[j], writes[j + 1], 'PX', ttl)
end
if idem then
  redis.call('SET', KEYS[nstate + 1], struct.pack('<ddd', rem, lim, rst_ms), 'PX', idem_ttl, 'NX')
end
return {1, rem, lim, 0, rst_ms, 0, 0}
