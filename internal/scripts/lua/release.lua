-- release: gives back the slot a request took with an acquire script when
-- the request ends. Only a slot taken can be given back, and once: its own key, written by
-- the acquire, names the bucket of the ring it is counted in, and is consumed here.
-- Idempotent: giving back a slot already given back, expired or never taken changes nothing.
--
-- KEYS[1]      the identity's slots: the ring the acquire script writes (RING buckets of struct
--              '>dd': the bucket's end, Redis-clock µs, and its count).
-- KEYS[2]      the slot's key (same tag, named after its id): struct '>dd', its bucket's
--              place in the ring (1 to RING) and end. Anything else is no slot.
-- ARGV         none.
-- Reply        1 when the slot was held and is given back, 0 otherwise (a slot whose bucket
--              an acquire has since moved to a later end stays counted until that end).
-- Cost         O(1): one GETRANGE of 16 bytes and one of the ring (512 bytes), one bucket
--              read, at most two SETs; no key names built here.
-- Refused      any other shape (not two keys and no argument): an ERR reply before any read.
--
{{template "prelude" .}}

if #KEYS ~= 2 or #ARGV ~= 0 then
  return redis.error_reply('ERR ratelimit: refused a release of ' .. #KEYS .. ' keys and ' .. #ARGV ..
    ' arguments: this script takes the slots key and the slot key')
end
local mark = get(KEYS[2], MARK, MARK_AT)
if not mark or #mark ~= 16 then
  return 0
end
redis.call('SET', KEYS[2], '', 'PX', '1')
local k, ends = struct.unpack('>dd', mark)
local v = get(KEYS[1], SLOTS, SLOTS_AT)
if not v or #v ~= 16 * RING or not (k >= 1 and k <= RING and k % 1 == 0) then
  return 0
end
local e, c = struct.unpack('>dd', v, 16 * k - 15)
if e ~= ends or not (c >= 1 and c <= 1000 and c % 1 == 0) then
  return 0
end
redis.call('SET', KEYS[1], string.sub(v, 1, 16 * k - 16) .. struct.pack('>dd', e, c - 1) .. string.sub(v, 16 * k + 1),
  'KEEPTTL')
return 1
