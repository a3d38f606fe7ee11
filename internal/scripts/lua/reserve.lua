-- reserve: records a reservation: the cost an admission of a policy whose cost its
-- response settles (cost.settle) debited, so that its settlement (the adjust script, op "settle")
-- counts only for a reservation the sidecar made, for this caller and policy, once. The
-- sidecar calls it right after the admission; a reservation it could not record cannot be
-- settled, and stands.
--
-- KEYS[1]      the reservation's record: the identity's first state key of the policy's
--              tier, ':settle:', and the reservation's id (32 random hexadecimal digits).
-- ARGV[1]      the cost reserved (a whole number, 1 to 2^40).
-- ARGV[2]      since: the µs from the start of the admission's check to now, as the
--              sidecar measured them (a whole number, 0 to 2^40): the record's time is now
--              minus since, never after the debit, so a settlement gives back to a window
--              only what that window counted.
-- ARGV[3]      the record's life in ms (1000 to 86400000): how long the reservation may be
--              settled.
-- Reply        1 when recorded; 0 when the key held a value (an id used twice): nothing
--              written.
-- Cost         O(1): TIME, one SET (NX, PX); no reads, no key names built here.
-- Refused      any other shape (not one key and three arguments, a cost, since or life
--              out of range): an ERR reply before any write.
--
{{template "prelude" .}}

local cost, since, life = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if #KEYS ~= 1 or #ARGV ~= 3 or not (cost and cost >= 1 and cost <= 1099511627776 and cost % 1 == 0) or
    not (since and since >= 0 and since <= 1099511627776 and since % 1 == 0) or
    not (life and life >= 1000 and life <= 86400000 and life % 1 == 0) then
  return redis.error_reply('ERR ratelimit: refused a reservation of ' .. #KEYS .. ' keys and ' .. #ARGV ..
    ' arguments: this script takes the record key, a whole cost from 1 to 2^40, a whole since from 0 to 2^40 µs' ..
    ' and a life of 1000 to 86400000 ms')
end
{{template "now" .}}
if redis.call('SET', KEYS[1], struct.pack('<dd', cost, now - since), 'PX', string.format('%d', life), 'NX') then
  return 1
end
return 0
