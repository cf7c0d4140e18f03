-- Fixed window (algo's fixed_window.go). State {w, n} as 2 doubles: the
-- window's id (floor(now/W), epoch-aligned; a calendar period's start ms)
-- and requests counted in it; {w, n, a} as 3 doubles once units were
-- charged ahead to the window after w (an allotment of the next window
-- taken before w ended, package allotment): a is that window's count
-- while w is still counting. Every function gets the id pw of the window
-- before cw, so a state {pw, n, a} counts a in cw.

-- fw_count is the count of the state at key in the window cw (whose
-- predecessor is pw; algo's fixedCount) and the units charged ahead to
-- the window after cw (nil: none).
local function fw_count(key, cw, pw)
  local sw, sn, sa = load(key, 2, 3)
  if sw == cw then
    return sn, sa
  elseif sw == pw then
    return sa or 0, nil
  end
  return 0, nil
end

-- fw_save writes count n of window cw, and a charged ahead to the window
-- after it (nil: none); the key expires when cw ends (in reset ms), or
-- with a when the next one does (in reset2 ms).
local function fw_save(key, cw, n, a, reset, reset2)
  if a then
    save(key, reset2, 3, cw, n, a)
  else
    save(key, reset, 2, cw, n)
  end
end

-- fw_decide decides a fixed window of id cw that ends in reset ms (the
-- window after it in reset2).
local function fw_decide(key, charge, count, cw, pw, reset, reset2, cost)
  local n, a = fw_count(key, cw, pw)
  if n + cost <= count then
    local level = n + cost
    if charge and cost > 0 then
      fw_save(key, cw, level, a, reset, reset2)
    end
    return 1, count - level, 0, 0, reset
  end
  return 0, math.max(count - n, 0), reset, 0, reset
end

-- fw_refund is the count of window cw -= cost if the state still counts
-- it (floor 0).
local function fw_refund(key, cw, pw, cost)
  local sw, sn, sa = load(key, 2, 3)
  if sw == cw and sa then
    unsave(key, 3, sw, math.max(sn - cost, 0), sa)
  elseif sw == cw then
    unsave(key, 2, sw, math.max(sn - cost, 0))
  elseif sw == pw and sa then
    unsave(key, 3, sw, sn, math.max(sa - cost, 0))
  end
end

-- fw_charge is n += cost in window cw (ending in reset ms, the next one
-- in reset2), up to 2*count.
local function fw_charge(key, cw, pw, reset, reset2, count, cost)
  local n, a = fw_count(key, cw, pw)
  fw_save(key, cw, math.min(n + cost, 2 * count), a, reset, reset2)
end

local function fixed_window(key, now, charge, count, W, _, _, _, cost)
  local cw = fdiv(now, W)
  local reset = (cw + 1) * W - now
  return fw_decide(key, charge, count, cw, cw - 1, reset, reset + W, cost)
end

local function refund_fixed_window(key, now, _, W, _, _, _, cost)
  local cw = fdiv(now, W)
  fw_refund(key, cw, cw - 1, cost)
end

local function charge_fixed_window(key, now, count, W, _, _, _, cost)
  local cw = fdiv(now, W)
  local reset = (cw + 1) * W - now
  fw_charge(key, cw, cw - 1, reset, reset + W, count, cost)
end

local function quota_fixed_window(count)
  return count
end

local function fixed_window_calendar(key, now, charge, count, b0, b1, b2, b3, cost, tail)
  local prev, start, stop, nstop = calendar_span(now, b0, b1, b2, b3, tail)
  return fw_decide(key, charge, count, start, prev, stop - now, nstop - now, cost)
end

local function refund_fixed_window_calendar(key, now, _, b0, b1, b2, b3, cost, tail)
  local prev, start = calendar_span(now, b0, b1, b2, b3, tail)
  fw_refund(key, start, prev, cost)
end

local function charge_fixed_window_calendar(key, now, count, b0, b1, b2, b3, cost, tail)
  local prev, start, stop, nstop = calendar_span(now, b0, b1, b2, b3, tail)
  fw_charge(key, start, prev, stop - now, nstop - now, count, cost)
end

-- fw_allot takes a slice of window cw (ending in reset ms, the next one
-- in reset2; pw is the window before cw, which lasted span ms): at most
-- want units and at most permille/1000 of those left, charged at once. It
-- returns the units granted, those left after them and reset. now may lie
-- ahead of the server's clock (a prefetch of the next window, taken while
-- pw still counts): then the grant is charged ahead, as {pw, n, a}, and
-- the key kept until cw ends even if the server's clock is span behind.
local function fw_allot(key, count, cw, pw, reset, reset2, span, want, permille)
  local sw, sn, sa = load(key, 2, 3)
  local n = 0
  if sw == cw then
    n = sn
  elseif sw == pw then
    n = sa or 0
  end
  local left = math.max(count - n, 0)
  local grant = math.min(want, fdiv(left * permille, 1000))
  if grant > 0 and sw == cw then
    fw_save(key, cw, n + grant, sa, reset, reset2)
  elseif grant > 0 then
    save(key, reset + span, 3, pw, sw == pw and sn or 0, n + grant)
  end
  return grant, left - grant, reset
end

local function allot_fixed_window(key, now, count, W, _, _, _, want, _, permille)
  local cw = fdiv(now, W)
  local reset = (cw + 1) * W - now
  return fw_allot(key, count, cw, cw - 1, reset, reset + W, W, want, permille)
end

local function allot_fixed_window_calendar(key, now, count, b0, b1, b2, b3, want, tail, permille)
  local prev, start, stop, nstop = calendar_span(now, b0, b1, b2, b3, tail)
  return fw_allot(key, count, start, prev, stop - now, nstop - now, start - prev, want, permille)
end
