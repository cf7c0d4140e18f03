-- Sliding window counter (algo.SlidingWindow = 3, Cloudflare 2017). State
-- {w, curr, prev} as 3 doubles. The estimate is prev*(W-el)/W + curr.
A[3] = function(key, c, now)
  local W = c.period
  local cw = fdiv(now, W)
  local el = now - cw * W
  local curr, prev = 0, 0
  local s = load(key, 3)
  if s then
    if s[1] == cw then
      curr, prev = s[2], s[3]
    elseif s[1] == cw - 1 then
      prev = s[2]
    end
  end
  local reset = (cw + 1) * W - now
  local weighted = prev * (W - el)
  local allowed = weighted + (curr + c.cost - 1) * W < c.count * W
  local level = curr
  if allowed then
    level = curr + c.cost
  end
  local remaining = math.max(fdiv(c.count * W - weighted - level * W, W), 0)
  if allowed then
    local write
    if c.cost > 0 then
      -- Keep the key while this window's count still weighs as prev in the
      -- next one: until the end of window cw+1.
      write = function() save(key, 2 * W - el, cw, level, prev) end
    end
    return { 1, remaining, 0, 0, reset }, write
  end
  -- First instant the same cost fits: later in this window while prev
  -- decays, else in the next one (prev' = curr, curr' = 0), else after it.
  local retry
  local dm = (c.count - curr - c.cost + 1) * W
  if dm > 0 then
    local e1 = fdiv(prev * W - dm, prev) + 1
    if e1 < W then
      retry = e1 - el
    end
  end
  if not retry then
    local d2 = (c.count - c.cost + 1) * W
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
  return { 0, remaining, retry, 0, reset }
end
