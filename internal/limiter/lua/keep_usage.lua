-- keep_usage.lua: how TokenBucket and GCRA read a limit's stored value. Not a script: the Go
-- side inlines the code after the @read marker below at every "-- @read" line of
-- token_bucket.lua and gcra.lua (their single-limit and loop bodies, so the check scripts and
-- the lease scripts), and a script so composed accepts the keep-usage shape (ARGV ending in
-- 'keep'; see the algorithm headers).
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
-- - struct '>dddd' (time, T0, credit, until): written while a grant (adjust.lua) lasts. The
--   first two read as '>dd'; credit is whole units beyond the burst, taken before the
--   bucket's own, until the Redis-clock time until (µs). Out: credit (0 when none, or when
--   until has passed) and till (until).
-- Big-endian, so that a packed value never reads as a number: for any time from 2005 to 2255
-- its first byte is 0x43 ('C'), which begins no numeral. A 16-byte value whose T0 is not at
-- least 1, or whose time is not after now, is a full bucket, as is any value not ours.
-- @read
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
