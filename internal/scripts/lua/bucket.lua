{{- define "about" -}}
-- The algorithm: a bucket of tokens (TokenBucket), which is also GCRA's virtual scheduling:
-- both admit exactly the same requests (TestGCRAAdmitsExactlyAsTokenBucket), so one body
-- serves both. A limit is T (µs per token: period / requests, computed by the client, so
-- whole microseconds keep the arithmetic exact) and burst (the capacity). Its state is the
-- Redis-clock time in µs at which the bucket is full again (GCRA's theoretical arrival
-- time): tokens now = burst - (full_at - now) / T. A request of cost c fits when
-- max(full_at, now) + c * T - now <= burst * T; it then moves full_at on by c * T.
--
-- The state's three formats (read below, "read"):
--   an integer      full_at alone, written by a call without keep-usage;
--   struct '>dd'    (full_at, the T it was written at), written with keep-usage (ARGV ending
--                   in 'keep'), so that a call at another T (a tier change, a per-caller
--                   override) keeps the caller's usage in tokens, not in µs;
--   struct '>dddd'  (full_at, T, credit, until), while a grant (adjust) lasts.
-- Limit i's two numbers in ARGV: T (µs per token, >= 1), then burst.
{{- end}}

{{- define "read" -}}
-- read: how "limit" below reads a limit's stored value.
--
-- In: v (the stored value; false or nil when absent), now, T, burst and cap = burst * T (the
-- limit's numbers in this call). Out: at, the stored time read at this T: the time in µs of
-- the Redis clock at which the bucket is full again (TokenBucket) or the theoretical arrival
-- time (GCRA), so that (at - now) / T is the tokens used; rescaled, true when at was
-- rescaled from another T; capped, true when the rescaled debt did not fit this limit's
-- capacity and at is now + cap (an empty bucket), at most the debt recorded. The body then
-- clamps at into [now, now + cap] as it always has. When rescaled and not capped it has the
-- value written back at this T even if the call denies (a re-encoding of the same usage,
-- nothing debited): otherwise a caller denied under its new rate would keep refilling at the
-- old one until its next admission (after a downgrade, at the faster rate it no longer has).
-- When capped a denial writes nothing (and a capped read always denies: the bucket is
-- empty): the stored value keeps the whole debt at the T it records, so a switch down and
-- back (a request that selects a smaller tier, then the caller's own again) forgives
-- nothing; writing the capped value would turn a debt of 90 of 100 tokens into 5 of 5, and
-- the way back into 5 of 100. Under the smaller limit the caller stays denied until its debt,
-- refilling at the rate it was written at, is less than the burst; the first read then
-- converts it. The new rate is in force from the caller's first call under it that does not
-- cap; an idle or capped caller's state refills at the rate it was written at until then.
--
-- Three formats:
-- - an integer, the time alone: written by a call without 'keep' (and before tiers). Read as
--   written at this T, as it always was.
-- - struct '>dd' (time, T0 = the µs per token it was written at): written by a keep-usage
--   call. With T0 = T it is the time. Otherwise the debt is rescaled so that the caller keeps
--   its usage in tokens, not in µs: d = time - now µs owed at T0 are d / T0 tokens, owed at
--   T from now on: at = now + ceil(d * T / T0), at most now + cap (a debt of burst tokens
--   or more is an empty bucket, capped: a downgrade below what was used denies until the
--   debt, refilling at T0, is less than the burst, and no reply reaches past this limit's
--   refill time).
--   Rounding up, in whole µs, keeps a refilling token's progress and never admits more than
--   the exact rule. In doubles: d = k * T0 + rem, k whole tokens (exact: integers below
--   2^52), then k * T (below cap) + ceil(rem * T / T0), exact when rem * T < 2^53 (the
--   rounded quotient stays within 1 / T0 of the exact one, never past an integer): always
--   when the caller used whole tokens at one instant, and whenever T0 * T < 2^53 (both rates
--   at least one token per 94 s, for instance). Beyond it, and for a value we did not write,
--   one µs more covers the rounding (a double's error is below 1 µs there). Below burst whole
--   tokens that µs may reach one past cap: at is then now + cap and not capped (the debt
--   fits, below cap). A value outside the exact case is capped when its rounded debt is
--   cap or more.
-- - struct '>dddd' (time, T0, credit, until): written while a grant (the adjust script) lasts. The
--   first two read as '>dd'; credit is whole units beyond the burst, taken before the
--   bucket's own, until the Redis-clock time until (µs). Out: credit (0 when none, or when
--   until has passed) and till (until).
-- Big-endian, so that a packed value never reads as a number: for any time from 2005 to 2255
-- its first byte is 0x43 ('C'), which begins no numeral. A 16-byte value whose T0 is not at
-- least 1, or whose time is not after now, is a full bucket, as is any value not ours.
local at, rescaled, capped, credit, till = tonumber(v), false, false, 0, 0
if not at then
  at = now
  if v and (#v == 16 or #v == 32) then
    local t0, T0 = struct.unpack('>dd', v)
    if #v == 32 then
      local c, u = struct.unpack('>dd', v, 17)
      if u > now and c >= 1 and c <= 1099511627776 then
        credit, till = c - c % 1, u
      end
    end
    if T0 == T then
      at = t0
    elseif t0 > now and T0 >= 1 then
      local d = t0 - now
      if d <= 4503599627370496 and d % 1 == 0 and T0 % 1 == 0 then
        local rem = d % T0
        local k = (d - rem) / T0
        if k >= burst then
          d, capped = cap, true
        else
          rem = rem * T
          if rem < 9007199254740992 then
            rem = math.ceil(rem / T0)
          else
            rem = math.ceil(rem / T0) + 1
          end
          d = k * T + rem
        end
      else
        d = math.ceil(d / T0 * T) + 1
        capped = d >= cap
      end
      at, rescaled = now + math.min(d, cap), true
    end
  end
end
{{- end}}

{{- define "limit" -}}
-- One limit, in a loop over them (i): a, b = T, burst; v = vals[i]. A value read at another
-- T and not capped goes into moves[i], written if the call denies.
local T, burst = a, b
local cap = burst * T
local v = vals[i]
{{template "read" .}}
local full = at
if not (full >= now) then
  full = now -- idle, a clock that moved backwards (failover), or not a number: refill nothing extra
elseif full > now + cap then
  -- Further off than this limit's refill time (an edit lowered burst * T, or the clock moved
  -- backwards): an empty bucket, so no reply reaches past the refill time.
  full = now + cap
end
if rescaled and not capped then
  -- Read at another T: written back at this one if the call denies (see "read"; a capped
  -- value is not: it keeps the whole debt).
  moves = moves or {}
  moves[i] = credit > 0 and struct.pack('>dddd', full, T, credit, till) or keep and struct.pack('>dd', full, T) or full
end
local used = full - now
-- A grant's credit (0 without one) pays first: take of the cost; the bucket pays the rest.
-- Integers below 2^53 throughout: x - x % T is T * floor(x / T) exactly, without a call.
local take = credit < cost and credit or cost
local after = used + (cost - take) * T
if cost - take > burst or after > cap then
  local left = cap - used
  left = (left - left % T) / T
  ok, r, retry, reset = false, (left > 0 and left or 0) + credit, -1, used
  if cost - take <= burst then
    retry = after - cap
  end
else
  local left = cap - after
  ok, r, retry, reset = true, (left - left % T) / T + credit - take, 0, after
  if credit > take then
    vals[i] = struct.pack('>dddd', now + after, T, credit - take, till)
  else
    vals[i] = keep and struct.pack('>dd', now + after, T) or now + after
  end
end
{{- end}}

{{- define "adjust" -}}
-- The change, after "limit" at cost 0, with its locals (full, used, T, keep, credit, till,
-- cap); op and amount are the adjustment's. A reset frees what is used and drops any credit;
-- a refund frees up to amount tokens of what is used (never beyond the burst, never touching
-- a credit); a grant adds amount to the credit, units beyond the burst taken before the
-- bucket's own, until the bucket's refill time (burst * T) from now (or an earlier grant's
-- end, if later). A charge takes amount from the credit, then the bucket, which it empties
-- at most; an unreserve is a refund (a bucket's tokens belong to no window).
local free, c, u = used, credit, till
if op == 'reset' then
  c = 0
elseif op == 'refund' or op == 'unreserve' then
  if amount * T < used then
    free = amount * T
  end
elseif op == 'charge' then
  -- Past what the bucket holds if it must: from the credit first, then the bucket, emptied
  -- at most (no value records a debt beyond an empty bucket).
  local take = math.min(credit, amount)
  free, c = -math.min((amount - take) * T, cap - used), credit - take
else
  free, c, u = 0, math.min(credit + amount, 1099511627776), math.max(till, now + cap)
end
if free ~= 0 or c ~= credit then
  if c > 0 then
    vals[i] = struct.pack('>dddd', full - free, T, c, u)
  else
    vals[i] = keep and struct.pack('>dd', full - free, T) or full - free
  end
  adj = true
end
{{- end}}

{{- define "unlease" -}}
-- A previous lease's unspent units back (the lease script): m units of the lease, from its index
-- next; mark is the Redis time of the lease's first cell. Only cells not yet started can
-- leave (cell j starts at mark + j * a): the time moves back by their span, never before
-- now; in a '>dd' value by their number of cells at the T the value records (a tier change
-- since the lease rescaled the debt), and the value keeps its format.
local past = math.ceil((now - mark) / a)
m = leased - math.max(next, past)
local tat, T0, packed = tonumber(v), a, false
if not tat and #v == 16 then
  tat, T0 = struct.unpack('>dd', v)
  packed = true
end
if m > 0 and tat and tat > now and T0 >= 1 then
  vals[i] = math.max(now, tat - m * T0)
  if packed then
    vals[i] = struct.pack('>dd', vals[i], T0)
  end
  redis.call('SET', KEYS[i], vals[i], 'KEEPTTL')
  returned = math.max(returned, m)
end
{{- end}}

{{- define "offset" -}}
-- A lease's offset on limit i (the lease script): the µs until the start of its first cell; unit j
-- may be spent only before off + j * T, so the tokens in the bucket plus the unspent leased
-- ones never exceed the burst.
offs[i] = reset - cost * a
{{- end}}

{{- define "mark" -}}
-- A lease's record of limit i (the lease script): the Redis time of its first cell, and the µs until
-- its last cell starts (the record lives that long).
mark, upto = now + offs[i], offs[i] + granted * a
{{- end}}
