-- release.lua: gives back the slot a request took with an acquire script (acquire.lua) when
-- the request ends. Idempotent: giving back a slot already given back, expired or never
-- taken changes nothing.
--
-- KEYS[1]      the identity's slots: the sorted set the acquire script added the slot to.
-- ARGV[1]      the slot id (1 to 64 bytes).
-- Reply        1 when the slot was held and is given back, 0 otherwise.
-- Cost         O(log N), N the slots held: one ZREM; no key names built here.
-- Refused      any other shape (not one key and one slot id of 1 to 64 bytes): an ERR reply
--              before any read.
if #KEYS ~= 1 or #ARGV ~= 1 or #ARGV[1] < 1 or #ARGV[1] > 64 then
  return redis.error_reply('ERR ratelimit: refused a release of ' .. #KEYS .. ' keys and ' .. #ARGV ..
    ' arguments: this script takes the slots key and one slot id of 1 to 64 bytes')
end
return redis.call('ZREM', KEYS[1], ARGV[1])
