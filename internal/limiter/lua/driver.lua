-- driver.lua: the part every limiter script shares. The Go side appends it to an algorithm
-- file, which defines KEYS_PER_LIMIT and check(); the protocol (KEYS, ARGV, reply) is
-- documented in each algorithm file's header.
local cost = tonumber(ARGV[1])
local ttl = ARGV[2]
local idem_ttl = tonumber(ARGV[3])
local n = (#ARGV - 3) / 3
local nstate = n * KEYS_PER_LIMIT

-- A request id seen before gets its first (admitting) decision back and debits nothing.
local idem = false
if idem_ttl > 0 then
  idem = KEYS[nstate + 1]
  local seen = redis.call('GET', idem)
  if seen then
    local rem, lim, rst = struct.unpack('<ddd', seen)
    return {1, rem, lim, 0, rst, 0, 1}
  end
end

local t = redis.call('TIME')
local sec, usec = tonumber(t[1]), tonumber(t[2])
local vals = redis.call('MGET', unpack(KEYS, 1, nstate))
local writes = {}
local allowed, deny, worst = 1, 0, 0
local rem, lim, rst = -1, 0, 0
for i = 1, n do
  local a = 3 * i + 1
  local ok, r, l, retry, reset = check(i, vals, sec, usec, cost,
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

local function ms(us)
  if us < 0 then return -1 end
  return math.ceil(us / 1000)
end

if allowed == 0 then
  return {0, rem, lim, ms(worst), ms(rst), deny, 0}
end
-- All limits admit: debit every one of them (all-or-nothing).
for j = 1, #writes, 2 do
  redis.call('SET', writes[j], writes[j + 1], 'PX', ttl)
end
if idem then
  redis.call('SET', idem, struct.pack('<ddd', rem, lim, ms(rst)), 'PX', idem_ttl, 'NX')
end
return {1, rem, lim, 0, ms(rst), 0, 0}
