-- Sliding window counter (algo's sliding_window.go, Cloudflare 2017).
-- State {w, curr, prev} as 3 doubles: the window's id (floor(now/W),
-- epoch-aligned; a calendar period's start ms), this window's count and
-- the previous window's.

-- sliding_count decides at el ms into a window of W ms followed by one of
-- Wn ms (they differ for calendar periods), with curr counted in this
-- window and prev in the one before (algo's slidingCount): accepted iff
-- floor(prev*(W-el)/W) + curr + cost - 1 < count, exact through muldiv
-- (count*W is never formed). Returns allowed (1/0), remaining, retryAfter.
local function sliding_count(curr, prev, el, W, Wn, count, cost)
  local floor, frac = muldiv(prev, W - el, W)
  local ceil = floor
  if frac then
    ceil = floor + 1
  end
  if floor + curr + cost - 1 < count then
    return 1, math.max(count - curr - cost - ceil, 0), 0
  end
  -- First instant the same cost fits: later in this window while prev
  -- decays (refused, so prev >= k), else in the next one (prev' = curr,
  -- curr' = 0), else after it.
  local k = count - curr - cost + 1
  if k > 0 then
    local e1 = muldiv(prev - k, W, prev) + 1
    if e1 < W then
      return 0, math.max(count - curr - ceil, 0), e1 - el
    end
  end
  local k2 = count - cost + 1
  local e2 = 0
  if curr >= k2 then
    e2 = muldiv(curr - k2, Wn, curr) + 1
  end
  if e2 > Wn then
    e2 = Wn
  end
  return 0, math.max(count - curr - ceil, 0), W - el + e2
end

-- sw_counts returns the counts of the state at key in the window of id
-- cw and in the one before it, of id pw (algo's slidingCounts).
local function sw_counts(key, cw, pw)
  local sw, sc, sp = load(key, 3)
  if sw == cw then
    return sc, sp
  elseif sw == pw then
    return 0, sc
  end
  return 0, 0
end

-- sw_decide decides at el ms into window cw of W ms (after window pw,
-- before one of Wn ms), keeping a charged key for ttl ms: while its count
-- still weighs as prev in the next window.
local function sw_decide(key, charge, count, cw, pw, el, W, Wn, ttl, cost)
  local curr, prev = sw_counts(key, cw, pw)
  local allowed, remaining, retry = sliding_count(curr, prev, el, W, Wn, count, cost)
  if allowed == 1 and charge and cost > 0 then
    save(key, ttl, 3, cw, curr + cost, prev)
  end
  return allowed, remaining, retry, 0, W - el
end

-- sw_refund is curr -= cost in window cw, or prev -= cost once the window
-- moved on by one, to the window of id next (floor 0).
local function sw_refund(key, cw, next, cost)
  local sw, sc, sp = load(key, 3)
  if sw == cw then
    unsave(key, 3, sw, math.max(sc - cost, 0), sp)
  elseif sw == next then
    unsave(key, 3, sw, sc, math.max(sp - cost, 0))
  end
end

-- sw_charge is curr += cost in window cw (after pw), up to 2*count, the
-- key kept for ttl ms.
local function sw_charge(key, cw, pw, ttl, count, cost)
  local curr, prev = sw_counts(key, cw, pw)
  save(key, ttl, 3, cw, math.min(curr + cost, 2 * count), prev)
end

local function sliding_window(key, now, charge, count, W, _, _, _, cost)
  local cw = fdiv(now, W)
  local el = now - cw * W
  return sw_decide(key, charge, count, cw, cw - 1, el, W, W, 2 * W - el, cost)
end

local function refund_sliding_window(key, now, _, W, _, _, _, cost)
  local cw = fdiv(now, W)
  sw_refund(key, cw, cw + 1, cost)
end

local function charge_sliding_window(key, now, count, W, _, _, _, cost)
  local cw = fdiv(now, W)
  sw_charge(key, cw, cw - 1, (cw + 2) * W - now, count, cost)
end

local function quota_sliding_window(count)
  return count
end

local function sliding_window_calendar(key, now, charge, count, b0, b1, b2, b3, cost, tail)
  local pstart, start, stop, nstop = calendar_span(now, b0, b1, b2, b3, tail)
  return sw_decide(key, charge, count, start, pstart, now - start, stop - start, nstop - stop, nstop - now, cost)
end

local function refund_sliding_window_calendar(key, now, _, b0, b1, b2, b3, cost, tail)
  local _, start, stop = calendar_span(now, b0, b1, b2, b3, tail)
  sw_refund(key, start, stop, cost)
end

local function charge_sliding_window_calendar(key, now, count, b0, b1, b2, b3, cost, tail)
  local pstart, start, _, nstop = calendar_span(now, b0, b1, b2, b3, tail)
  sw_charge(key, start, pstart, nstop - now, count, cost)
end

-- sw_allot takes a slice of window cw at el ms into it (W ms long, after
-- window pw), keeping the key for ttl ms: at most want units and at most
-- permille/1000 of those the counter would accept one by one now,
-- count - floor(prev*(W-el)/W) - curr (sliding_count's test), charged
-- to curr at once. As prev's weight only falls later in the window, every
-- unit of the slice spent in this window passes that test on the counts
-- the fleet admitted. No slice of the next window is taken ahead: its
-- prev is this window's final count. It returns the units granted, those
-- left after them and the ms to the window's end.
local function sw_allot(key, count, cw, pw, el, W, ttl, want, permille)
  local curr, prev = sw_counts(key, cw, pw)
  local left = math.max(count - muldiv(prev, W - el, W) - curr, 0)
  local grant = math.min(want, fdiv(left * permille, 1000))
  if grant > 0 then
    save(key, ttl, 3, cw, curr + grant, prev)
  end
  return grant, left - grant, W - el
end

local function allot_sliding_window(key, now, count, W, _, _, _, want, _, permille)
  local cw = fdiv(now, W)
  local el = now - cw * W
  return sw_allot(key, count, cw, cw - 1, el, W, 2 * W - el, want, permille)
end

local function allot_sliding_window_calendar(key, now, count, b0, b1, b2, b3, want, tail, permille)
  local pstart, start, stop, nstop = calendar_span(now, b0, b1, b2, b3, tail)
  return sw_allot(key, count, start, pstart, now - start, stop - start, nstop - now, want, permille)
end
