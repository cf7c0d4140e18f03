-- Token bucket (algo.TokenBucket = 4). State {T, L} as 2 doubles: tokens in
-- units (one request = P units, refill R units/ms) and last ms. Idle = full.
A[4] = function(key, c, now)
  local P, R = c.period, c.count
  local BP = c.burst * P
  local T, L = BP, now
  local s = load(key, 2)
  if s then
    -- A burst lowered below the stored tokens caps them at once.
    if s[1] < BP then
      local elapsed = math.max(now - s[2], 0)
      T = math.min(s[1] + math.min(elapsed, cdiv(BP - s[1], R)) * R, BP)
    end
    L = math.max(s[2], now)
  end
  local need = c.cost * P
  if T >= need then
    local level = T - need
    local reset = cdiv(BP - level, R)
    local write
    if c.cost > 0 then
      -- The refill runs from L, which may lie ahead of now on replay.
      write = function() save(key, L - now + reset, level, L) end
    end
    return { 1, fdiv(level, P), 0, 0, reset }, write
  end
  return { 0, fdiv(T, P), cdiv(need - T, R), 0, cdiv(BP - T, R) }
end
