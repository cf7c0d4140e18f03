-- Fixed window (algo.FixedWindow = 1). State {w, n} as 2 doubles: window
-- number (floor(now/W), epoch-aligned) and requests counted in it.
A[1] = function(key, c, now)
  local W = c.period
  local cw = fdiv(now, W)
  local n = 0
  local s = load(key, 2)
  if s and s[1] == cw then
    n = s[2]
  end
  local reset = (cw + 1) * W - now
  if n + c.cost <= c.count then
    local level = n + c.cost
    local write
    if c.cost > 0 then
      write = function() save(key, reset, cw, level) end
    end
    return { 1, c.count - level, 0, 0, reset }, write
  end
  return { 0, math.max(c.count - n, 0), reset, 0, reset }
end
