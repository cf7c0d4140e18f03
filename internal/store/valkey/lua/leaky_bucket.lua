-- Leaky bucket (algo.LeakyBucket = 5), nginx limit_req as GCRA. State {E, L}
-- as 2 doubles: excess in units (one request = P units, drains R units/ms)
-- and last ms. Idle = no state = excess -P.
local function leaky_bucket(key, now, charge, R, P, burst, delay, nodelay, cost)
  local BP = burst * P
  local X, L = -P, now
  local E, SL = load(key, 2)
  if E then
    -- Clamp elapsed first so elapsed*R stays exact (DESIGN.md).
    local elapsed = math.min(math.max(now - SL, 0), fdiv(E + P, R) + 1)
    X = math.max(E - elapsed * R, -P)
    L = math.max(SL, now)
  end
  local new = X + cost * P
  if new <= BP then
    -- A Delay >= Burst delays nothing (nginx); min keeps Delay*P exact.
    local dp = math.min(delay, burst) * P
    local wait = 0
    if not nodelay and new > dp then
      wait = cdiv(new - dp, R)
    end
    local reset = cdiv(new + P, R)
    if charge and cost > 0 then
      save(key, L - now + reset, 2, new, L)
    end
    return 1, math.max(fdiv(BP - new, P), 0), 0, wait, reset
  end
  return 0, math.max(fdiv(BP - X, P), 0), cdiv(new - BP, R), 0, cdiv(X + P, R)
end
