{{- /*
decide.lua: the decision every check-like script shares (check.lua, acquire.lua): each limit
decided by the algorithm's "limit", folded into one answer, and its tails. Not a script.
*/ -}}

{{- define "fold" -}}
-- Every limit decided: limit i's two numbers are ARGV[base + 2i] and ARGV[base + 2i + 1]
-- (a calendar window's "start:end" stays a string). The limit that must wait longest names
-- a denial (-1, never, outranks any wait); the tightest names an admission. On admission each
-- limit has put its new state into vals[i]; moves holds the keep-usage values read at
-- another T, written even when the call denies.
local allowed, idx, worst = true, 0, 0
local rem, rst = -1, 0
local moves
for i = 1, n do
  local a, b = ARGV[base + 2 * i] + 0, tonumber(ARGV[base + 1 + 2 * i]) or ARGV[base + 1 + 2 * i]
  local ok, r, retry, reset
  do
    {{include "limit" . | indent 4}}
  end
  if not ok then
    if allowed or (worst >= 0 and (retry < 0 or retry > worst)) then
      idx, worst, rem, rst = i, retry, r, reset
    end
    allowed = false
  elseif allowed and (rem < 0 or r < rem) then
    idx, rem, rst = i, r, reset
  end
end
{{- end}}

{{- define "deny" -}}
-- code = allowed + 2*replayed + 4*index of the reported limit + 64*remaining. Times leave in
-- whole milliseconds, rounded up; -1 stays "never". A denial writes only the moves.
local code = 4 * idx + 64 * rem
-- rst is a whole number of µs: (x + (-x) % 1000) / 1000 is ceil(x / 1000), without a call.
rst = (rst + (-rst) % 1000) / 1000
if not allowed then
  if worst > 0 then
    worst = math.ceil(worst / 1000)
  end
  if moves then
    for k, m in pairs(moves) do
      -- A whole number in the digits Redis would write for it ('%.17g'), at a third of the cost.
      if type(m) == 'number' and m % 1 == 0 and m >= 0 and m < 9007199254740992 then m = string.format('%d', m) end
      redis.call('SET', KEYS[k], m, 'PX', px)
    end
  end
  return {code, worst, rst}
end
{{- end}}

{{- define "commit" -}}
-- Every limit admits: write every new state (all-or-nothing).
for k = 1, n do
  local v = vals[k]
  -- A whole number in the digits Redis would write for it ('%.17g'), at a third of the cost.
  if type(v) == 'number' and v % 1 == 0 and v >= 0 and v < 9007199254740992 then v = string.format('%d', v) end
  if v then redis.call('SET', KEYS[k], v, 'PX', px) end
end
code = code + 1
{{- end}}
