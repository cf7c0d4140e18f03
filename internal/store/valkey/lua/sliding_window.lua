-- Sliding window counter (algo.SlidingWindow = 3, Cloudflare 2017). State
-- {w, curr, prev} as 3 doubles: the window number (floor(now/W),
-- epoch-aligned), this window's count and the previous window's.

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

local function sliding_window(key, now, charge, count, W, _, _, _, cost)
  local cw = fdiv(now, W)
  local el = now - cw * W
  local curr, prev = 0, 0
  local sw, sc, sp = load(key, 3)
  if sw == cw then
    curr, prev = sc, sp
  elseif sw == cw - 1 then
    prev = sc
  end
  local allowed, remaining, retry = sliding_count(curr, prev, el, W, W, count, cost)
  if allowed == 1 and charge and cost > 0 then
    -- Keep the key while this window's count still weighs as prev in the
    -- next one: until the end of window cw+1.
    save(key, 2 * W - el, 3, cw, curr + cost, prev)
  end
  return allowed, remaining, retry, 0, W - el
end
