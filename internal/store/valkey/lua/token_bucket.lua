-- Token bucket (algo.TokenBucket = 4). State {D, L} as 2 doubles: the
-- deficit (tokens taken and not yet refilled) in units (one request = P
-- units, refill R units/ms) and last ms. Idle = no key = full. Keeping the
-- deficit, not the tokens, makes a raised burst admit at once after a reload
-- (CONFIG-SPEC "Reload"); a deficit beyond the capacity empties the bucket.
A[4] = function(key, c, now)
  local P, R = c.period, c.count
  local BP = c.burst * P
  local T, L = BP, now
  local s = load(key, 2)
  if s then
    local D = math.min(s[1], BP) -- a lowered burst: empty, not in debt
    local elapsed = math.min(math.max(now - s[2], 0), cdiv(D, R))
    T = BP - math.max(D - elapsed * R, 0)
    L = math.max(s[2], now)
  end
  local need = c.cost * P
  if T >= need then
    local level = T - need
    local reset = cdiv(BP - level, R)
    local write
    if c.cost > 0 then
      -- The refill runs from L, which may lie ahead of now on replay.
      write = function() save(key, L - now + reset, BP - level, L) end
    end
    return { 1, fdiv(level, P), 0, 0, reset }, write
  end
  return { 0, fdiv(T, P), cdiv(need - T, R), 0, cdiv(BP - T, R) }
end
