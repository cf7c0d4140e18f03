-- Leaky bucket (algo's leaky_bucket.go), nginx limit_req as GCRA. State
-- {E, L} as 2 doubles: excess in units (one request = P units, drains R
-- units/ms) and last ms. Idle = no state = excess -P.

-- lb_level returns the excess at now in units (-P: empty) of the state at
-- key and the ms the drain runs from (algo's leakyLevel). elapsed is
-- clamped first so elapsed*R stays exact (DESIGN.md).
local function lb_level(key, now, R, P)
  local E, SL = load(key, 2)
  if not E then
    return -P, now
  end
  local elapsed = math.min(math.max(now - SL, 0), fdiv(E + P, R) + 1)
  return math.max(E - elapsed * R, -P), math.max(SL, now)
end

local function leaky_bucket(key, now, charge, R, P, burst, delay, nodelay, cost)
  local BP = burst * P
  local X, L = lb_level(key, now, R, P)
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

-- Take the requests' water out (down to empty).
local function refund_leaky_bucket(key, _, _, P, _, _, _, cost)
  local E, L = load(key, 2)
  if E then
    unsave(key, 2, math.max(E - cost * P, -P), L)
  end
end

-- Add the requests' water, up to (burst + quota) requests.
local function charge_leaky_bucket(key, now, R, P, burst, _, _, cost)
  local X, L = lb_level(key, now, R, P)
  local new = math.min(X + cost * P, (2 * burst + 1) * P)
  save(key, L - now + cdiv(new + P, R), 2, new, L)
end

local function quota_leaky_bucket(_, burst)
  return burst + 1
end
