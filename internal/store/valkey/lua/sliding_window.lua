-- Sliding window counter (algo.SlidingWindow = 3, Cloudflare 2017). State
-- {w, curr, prev} as 3 doubles. The estimate is prev*(W-el)/W + curr.
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
  local reset = (cw + 1) * W - now
  local weighted = prev * (W - el)
  local allowed = weighted + (curr + cost - 1) * W < count * W
  local level = curr
  if allowed then
    level = curr + cost
  end
  local remaining = math.max(fdiv(count * W - weighted - level * W, W), 0)
  if allowed then
    if charge and cost > 0 then
      -- Keep the key while this window's count still weighs as prev in the
      -- next one: until the end of window cw+1.
      save(key, 2 * W - el, 3, cw, level, prev)
    end
    return 1, remaining, 0, 0, reset
  end
  -- First instant the same cost fits: later in this window while prev
  -- decays, else in the next one (prev' = curr, curr' = 0), else after it.
  local retry
  local dm = (count - curr - cost + 1) * W
  if dm > 0 then
    local e1 = fdiv(prev * W - dm, prev) + 1
    if e1 < W then
      retry = e1 - el
    end
  end
  if not retry then
    local d2 = (count - cost + 1) * W
    local e2 = W
    if curr * W < d2 then
      e2 = 0
    elseif curr > 0 then
      e2 = fdiv(curr * W - d2, curr) + 1
    end
    if e2 < W then
      retry = W - el + e2
    else
      retry = 2 * W - el
    end
  end
  return 0, remaining, retry, 0, reset
end
