-- Token bucket (algo.TokenBucket = 4). State {D, L} as 2 doubles: the
-- deficit (tokens taken and not yet refilled) in units (one request = P
-- units, refill R units/ms) and last ms. Idle = no key = full. Keeping the
-- deficit, not the tokens, makes a raised burst admit at once after a reload
-- (docs/CONTRACT.md "Reload"); a deficit beyond the capacity empties the
-- bucket. A debt left by an unconditional charge (charge.lua) is stored as
-- D < 0: the bucket is empty and owes -D more, whatever the burst.

-- tb_deficit is the deficit of a stored D (algo's tokenDeficit): a lowered
-- burst empties the bucket without debt; a debt stays.
local function tb_deficit(D, BP)
  if D < 0 then
    return BP - D
  end
  return math.min(D, BP)
end

local function token_bucket(key, now, charge, R, P, burst, _, _, cost)
  local BP = burst * P
  local T, L = BP, now
  local D, SL = load(key, 2)
  if D then
    D = tb_deficit(D, BP)
    local elapsed = math.min(math.max(now - SL, 0), cdiv(D, R))
    T = BP - math.max(D - elapsed * R, 0)
    L = math.max(SL, now)
  end
  local need = cost * P
  if T >= need then
    local level = T - need
    local reset = cdiv(BP - level, R)
    if charge and cost > 0 then
      -- The refill runs from L, which may lie ahead of now on replay.
      save(key, L - now + reset, 2, BP - level, L)
    end
    return 1, fdiv(level, P), 0, 0, reset
  end
  return 0, fdiv(math.max(T, 0), P), cdiv(need - T, R), 0, cdiv(BP - T, R)
end
