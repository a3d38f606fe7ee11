-- release.lua: gives back the slot a request took with an acquire script (acquire.lua) when
-- the request ends. Idempotent: giving back a slot already given back, expired or never
-- taken changes nothing.
--
-- KEYS[1]      the identity's slots: the string of 40-byte records the acquire script
--              writes (expiry, struct '>d' in µs, then the 32-byte slot id).
-- ARGV[1]      the slot id (32 bytes).
-- Reply        1 when the slot was held and is given back, 0 otherwise.
-- Cost         O(h), h <= 1000 the slots held: one MGET, each record read once, at most
--              one SET (KEEPTTL); no key names built here.
-- Refused      any other shape (not one key and one slot id of 32 bytes): an ERR reply
--              before any read.
if #KEYS ~= 1 or #ARGV ~= 1 or #ARGV[1] ~= 32 then
  return redis.error_reply('ERR ratelimit: refused a release of ' .. #KEYS .. ' keys and ' .. #ARGV ..
    ' arguments: this script takes the slots key and one slot id of 32 bytes')
end
local v = redis.call('MGET', KEYS[1])[1]
if not v or #v % 40 ~= 0 or #v > 40000 then
  return 0
end
for at = 1, #v, 40 do
  if string.sub(v, at + 8, at + 39) == ARGV[1] then
    redis.call('SET', KEYS[1], string.sub(v, 1, at - 1) .. string.sub(v, at + 40), 'KEEPTTL')
    return 1
  end
end
return 0
