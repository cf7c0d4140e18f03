-- Fixed window (algo.FixedWindow = 1). State {w, n} as 2 doubles: window
-- number (floor(now/W), epoch-aligned) and requests counted in it.

-- fixed_count decides a fixed window whose state id is cw (the window
-- number, or a calendar period's start ms) and which ends in reset ms.
local function fixed_count(key, charge, count, cw, reset, cost)
  local n = 0
  local sw, sn = load(key, 2)
  if sw == cw then
    n = sn
  end
  if n + cost <= count then
    local level = n + cost
    if charge and cost > 0 then
      save(key, reset, 2, cw, level)
    end
    return 1, count - level, 0, 0, reset
  end
  return 0, math.max(count - n, 0), reset, 0, reset
end

local function fixed_window(key, now, charge, count, W, _, _, _, cost)
  local cw = fdiv(now, W)
  return fixed_count(key, charge, count, cw, (cw + 1) * W - now, cost)
end
