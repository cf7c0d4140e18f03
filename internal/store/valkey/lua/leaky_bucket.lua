-- Leaky bucket (algo.LeakyBucket = 5), nginx limit_req as GCRA. State {E, L}
-- as 2 doubles: excess in units (one request = P units, drains R units/ms)
-- and last ms. Idle = no state = excess -P.
A[5] = function(key, c, now)
  local P, R = c.period, c.count
  local BP = c.burst * P
  local X, L = -P, now
  local s = load(key, 2)
  if s then
    local E = s[1]
    -- Clamp elapsed first so elapsed*R stays exact (DESIGN.md).
    local elapsed = math.min(math.max(now - s[2], 0), fdiv(E + P, R) + 1)
    X = math.max(E - elapsed * R, -P)
    L = math.max(s[2], now)
  end
  local new = X + c.cost * P
  if new <= BP then
    -- A Delay >= Burst delays nothing (nginx); min keeps Delay*P exact.
    local dp = math.min(c.delay, c.burst) * P
    local wait = 0
    if not c.nodelay and new > dp then
      wait = cdiv(new - dp, R)
    end
    local reset = cdiv(new + P, R)
    local write
    if c.cost > 0 then
      write = function() save(key, L - now + reset, new, L) end
    end
    return { 1, math.max(fdiv(BP - new, P), 0), 0, wait, reset }, write
  end
  return { 0, math.max(fdiv(BP - X, P), 0), cdiv(new - BP, R), 0, cdiv(X + P, R) }
end
