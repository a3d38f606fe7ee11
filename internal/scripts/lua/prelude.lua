{{- define "now" -}}
{{- if .Shared -}}
-- now: read once for every check of the call (above).
{{- else -}}
{{template "clock" .}}
{{- end -}}
{{- end}}

{{- define "clock" -}}
{{- if .ClockKey -}}
-- now: the µs a test set in its clock key (internal/limiter's fake clock), not TIME.
local now = tonumber(redis.call('GET', '{{.ClockKey}}'))
{{- else -}}
-- now: the Redis server's clock in µs (TIME; arithmetic coerces its numeric strings itself).
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
{{- end -}}
{{- end}}

{{- define "prelude" -}}
-- prelude: what every limiter script holds before its own code: the one way a script reads a
-- key. A tenant's Redis user may SET any value under its own prefix (the scripts write there
-- with its rights), so every value read is untrusted, of any size and any type. No script
-- reads a key otherwise: a test (TestScriptsReadKeysOnlyThroughGet) refuses MGET, GET and
-- GETRANGE anywhere else. docs/security.md has the table of key kinds.
--
-- get(key, most, at) is key's value when it is a string of 1 to most bytes, else false:
-- missing, of another type, or longer than most (no value of ours is: it is not ours); at is
-- most in text, GETRANGE's last index (the bounds below come in both forms). Its second
-- result, odd, is true when the key holds something that is neither missing nor such a
-- value (a longer string, another type): a record must be refused then, not taken for none.
-- GETRANGE hands the script at most most + 1 bytes whatever the key holds, so a value of
-- 512 MB costs a script no more than one of ours. Every error but WRONGTYPE (NOPERM: a key
-- outside the caller's ACL) fails the script; it never reads as fresh state, which would
-- admit.
--
-- The most each key kind may hold (docs/security.md has the table of shapes):
--   STATE    a limit's state: an integer (TokenBucket, GCRA), or struct '>dd' or '>dddd'
--            (keep-usage, a grant), '<dd' (FixedWindow), '<ddd' (SlidingWindow)
--   REPLAY   a check's idempotency record: struct '<ddd' then the 16-byte fingerprint
--   RECORD   an adjustment's or a settlement's record: the 16-byte fingerprint then
--            '<d' per figure of its reply (24 + 24n bytes, n <= 8 limits); a
--            reservation not yet settled: '<dd'
--   LEASE    a lease's record: '<d' then '<ddd' per limit (at most 8)
--   SLOTS    an identity's concurrency slots: a ring of RING buckets of 16 bytes
--            (the acquire script)
--   MARK     a slot's own key: 16 bytes
-- Each comes twice: a number, and the same in text (_AT) for GETRANGE's last index: Redis
-- writes a Lua number out with '%.17g' for a command, an eighth of a check's work.
local STATE, REPLAY, RECORD, LEASE, MARK, RING = 32, 40, 216, 200, 16, 32
local SLOTS = 16 * RING
local STATE_AT, REPLAY_AT, RECORD_AT, LEASE_AT, MARK_AT, SLOTS_AT = '32', '40', '216', '200', '16', '512'
-- RINGFORMAT reads or writes the whole ring in one struct call: '>' then RING times 'dd'.
-- Written out: a function library's top level, run at FUNCTION LOAD, has no string library.
local RINGFORMAT = '>dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd'

local function get(key, most, at)
  local v = redis.pcall('GETRANGE', key, '0', at)
  if type(v) == 'table' then
    if v.err and string.sub(v.err, 1, 9) == 'WRONGTYPE' then
      return false, true
    end
    -- Any other refusal: call again, unprotected, so the script fails with it.
    return redis.call('GETRANGE', key, '0', at)
  end
  if #v == 0 then
    return false, false
  end
  if #v > most then
    return false, true
  end
  return v, false
end
{{- end}}
