-- baseline_token_bucket.lua: bench fixture only, never used by the product. The token bucket
-- written the straightforward way (as in the user's reference): HMGET, HMSET, PEXPIRE, ms
-- clock, fields as decimal strings. Our scripts are measured against it in the same run.
--
-- KEYS[1]  the bucket hash.
-- ARGV[1]  refill per second, ARGV[2] capacity, ARGV[3] cost, ARGV[4] ttl ms.
-- Reply    {allowed 0|1, tokens left}.
-- Cost     O(1): TIME, HMGET, HMSET, PEXPIRE.
local key = KEYS[1]
local rate = tonumber(ARGV[1])
local cap = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local data = redis.call('HMGET', key, 'tokens', 'ts')
local tokens = tonumber(data[1]) or cap
local ts = tonumber(data[2]) or now
tokens = math.min(cap, tokens + (math.max(0, now - ts) / 1000.0) * rate)
local allowed = 0
if tokens >= cost then
  tokens = tokens - cost
  allowed = 1
end
redis.call('HMSET', key, 'tokens', tokens, 'ts', now)
redis.call('PEXPIRE', key, ARGV[4])
return {allowed, math.floor(tokens)}
