-- Fixed window (algo's fixed_window.go). State {w, n} as 2 doubles: the
-- window's id (floor(now/W), epoch-aligned; a calendar period's start ms)
-- and requests counted in it.

-- fw_count is the count of the state at key in the window of id cw (algo's
-- fixedCount).
local function fw_count(key, cw)
  local sw, sn = load(key, 2)
  if sw == cw then
    return sn
  end
  return 0
end

-- fw_decide decides a fixed window of id cw that ends in reset ms.
local function fw_decide(key, charge, count, cw, reset, cost)
  local n = fw_count(key, cw)
  if n + cost <= count then
    local level = n + cost
    if charge and cost > 0 then
      save(key, reset, 2, cw, level)
    end
    return 1, count - level, 0, 0, reset
  end
  return 0, math.max(count - n, 0), reset, 0, reset
end

-- fw_refund is n -= cost if the state is still in window cw (floor 0).
local function fw_refund(key, cw, cost)
  local sw, sn = load(key, 2)
  if sw == cw then
    unsave(key, 2, sw, math.max(sn - cost, 0))
  end
end

-- fw_charge is n += cost in window cw (ending in ttl ms), up to 2*count.
local function fw_charge(key, cw, ttl, count, cost)
  save(key, ttl, 2, cw, math.min(fw_count(key, cw) + cost, 2 * count))
end

local function fixed_window(key, now, charge, count, W, _, _, _, cost)
  local cw = fdiv(now, W)
  return fw_decide(key, charge, count, cw, (cw + 1) * W - now, cost)
end

local function refund_fixed_window(key, now, _, W, _, _, _, cost)
  fw_refund(key, fdiv(now, W), cost)
end

local function charge_fixed_window(key, now, count, W, _, _, _, cost)
  local cw = fdiv(now, W)
  fw_charge(key, cw, (cw + 1) * W - now, count, cost)
end

local function quota_fixed_window(count)
  return count
end

local function fixed_window_calendar(key, now, charge, count, b0, b1, b2, b3, cost, tail)
  local _, start, stop = calendar_span(now, b0, b1, b2, b3, tail)
  return fw_decide(key, charge, count, start, stop - now, cost)
end

local function refund_fixed_window_calendar(key, now, _, b0, b1, b2, b3, cost, tail)
  local _, start = calendar_span(now, b0, b1, b2, b3, tail)
  fw_refund(key, start, cost)
end

local function charge_fixed_window_calendar(key, now, count, b0, b1, b2, b3, cost, tail)
  local _, start, stop = calendar_span(now, b0, b1, b2, b3, tail)
  fw_charge(key, start, stop - now, count, cost)
end

-- fw_allot takes a slice of window cw (ending in reset ms): at most want
-- units and at most permille/1000 of those left, charged at once. It
-- returns the units granted, those left after them and reset.
local function fw_allot(key, count, cw, reset, want, permille)
  local n = fw_count(key, cw)
  local left = math.max(count - n, 0)
  local grant = math.min(want, fdiv(left * permille, 1000))
  if grant > 0 then
    save(key, reset, 2, cw, n + grant)
  end
  return grant, left - grant, reset
end

local function allot_fixed_window(key, now, count, W, _, _, _, want, _, permille)
  local cw = fdiv(now, W)
  return fw_allot(key, count, cw, (cw + 1) * W - now, want, permille)
end

local function allot_fixed_window_calendar(key, now, count, b0, b1, b2, b3, want, tail, permille)
  local _, start, stop = calendar_span(now, b0, b1, b2, b3, tail)
  return fw_allot(key, count, start, stop - now, want, permille)
end
