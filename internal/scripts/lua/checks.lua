-- checks: several checks in one call, each exactly as the check script runs it (its keys and
-- arguments as the check takes them), one after another. A pipeline to a standalone or
-- Sentinel Redis sends its checks of one algorithm so: the script's own overhead (the call,
-- the clock) is paid once for them all. Each check is as atomic and exact as alone: nothing
-- runs between them.
--
-- KEYS[...]    every check's keys, one check's after another's.
-- ARGV[1]      m: the checks (1 to 128).
-- ARGV[...]    per check, in order: the number of its keys (1 to 9), the number of its
--              arguments (4 to 22), then its arguments, as the check script takes them.
-- Reply        {reply_1, ..., reply_m}: each check's reply as the check script gives it (an
--              error reply in its place for a check of a shape the check refuses).
-- Cost         O(n) in the number of limits (n <= 8) of each of at most 128 checks: TIME once,
--              then each check's reads and writes; no loops over data, no key names built
--              here.
-- Refused      any other shape (no check or more than 128, counts that do not add up to KEYS
--              and ARGV): an ERR reply before any check runs.
--
{{template "about" .}}

{{template "prelude" .}}

local m = tonumber(ARGV[1])
local total, ok = 1, m and m >= 1 and m <= 128 and m % 1 == 0
local keys = 0
if ok then
  for _ = 1, m do
    local nk, na = tonumber(ARGV[total + 1]), tonumber(ARGV[total + 2])
    if not (nk and na and nk >= 1 and nk <= 9 and nk % 1 == 0 and na >= 4 and na <= 22 and na % 1 == 0) then
      ok = false
      break
    end
    keys, total = keys + nk, total + 2 + na
  end
end
if not ok or keys ~= #KEYS or total ~= #ARGV then
  return redis.error_reply('ERR ratelimit: refused a call of ' .. #KEYS .. ' keys and ' .. #ARGV ..
    ' arguments: this script takes 1 to 128 checks, each its keys and arguments counted before its arguments')
end

{{template "clock" .}}

-- One check, its KEYS and ARGV its own.
local function check(KEYS, ARGV)
  {{include "check" . | indent 2}}
end

local out, kb, ab = {}, 0, 1
for c = 1, m do
  local nk, na = ARGV[ab + 1] + 0, ARGV[ab + 2] + 0
  out[c] = check({unpack(KEYS, kb + 1, kb + nk)}, {unpack(ARGV, ab + 3, ab + 2 + na)})
  kb, ab = kb + nk, ab + 2 + na
end
return out
