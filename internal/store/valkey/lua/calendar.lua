-- Calendar windows (algo.Limit.Calendar): the fixed window as kind 7, the
-- sliding window counter as kind 8, on periods of a time zone's calendar
-- that Go computes (algo.Calendar.SpanAt, time/tzdata) and passes in the
-- check's period, burst, delay and nodelay slots and its lease slot: six
-- consecutive period starts b0 < ... < b5 around Go's clock (Go's now in
-- [b2, b3)), as b0, b1, b2, b3 and "b4:b5". The script's own now (TIME)
-- may lie a period either way. State as kinds 1 and 3, with a period's
-- start ms as its id.

-- calendar_span returns the period containing now and its neighbours:
-- previous start, start, end, next end.
local function calendar_span(now, b0, b1, b2, b3, tail)
  local b4, b5 = string.match(tail, '^(%d+):(%d+)$')
  b4, b5 = tonumber(b4), tonumber(b5)
  if now < b1 or now >= b4 then
    error('rlproxy: now ' .. int(now) .. ' is not in the calendar periods passed (clocks a period apart)')
  end
  if now < b2 then
    return b0, b1, b2, b3
  elseif now < b3 then
    return b1, b2, b3, b4
  end
  return b2, b3, b4, b5
end

local function fixed_calendar(key, now, charge, count, b0, b1, b2, b3, cost, tail)
  local _, start, stop = calendar_span(now, b0, b1, b2, b3, tail)
  return fixed_count(key, charge, count, start, stop - now, cost)
end

local function sliding_calendar(key, now, charge, count, b0, b1, b2, b3, cost, tail)
  local pstart, start, stop, nstop = calendar_span(now, b0, b1, b2, b3, tail)
  local curr, prev = 0, 0
  local sw, sc, sp = load(key, 3)
  if sw == start then
    curr, prev = sc, sp
  elseif sw == pstart then
    prev = sc
  end
  local allowed, remaining, retry = sliding_count(curr, prev, now - start, stop - start, nstop - stop, count, cost)
  if allowed == 1 and charge and cost > 0 then
    save(key, nstop - now, 3, start, curr + cost, prev)
  end
  return allowed, remaining, retry, 0, stop - now
end

-- The refunds (refund.lua) and charges (charge.lua) of kinds 7 and 8,
-- given the check's ARGV offset b.
local function calendar_args(b)
  return tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4]), tonumber(ARGV[b + 5]), tonumber(ARGV[b + 6]), ARGV[b + 8]
end

local function refund_fixed_calendar(key, now, _, cost, _, _, b)
  local _, start = calendar_span(now, calendar_args(b))
  local sw, sn = load(key, 2)
  if sw == start then
    unsave(key, 2, sw, math.max(sn - cost, 0))
  end
end

local function refund_sliding_calendar(key, now, _, cost, _, _, b)
  local _, start, stop = calendar_span(now, calendar_args(b))
  local sw, sc, sp = load(key, 3)
  if sw == start then
    unsave(key, 3, sw, math.max(sc - cost, 0), sp)
  elseif sw == stop then
    unsave(key, 3, sw, sc, math.max(sp - cost, 0))
  end
end

local function charge_fixed_calendar(key, now, count, _, _, cost, b)
  local _, start, stop = calendar_span(now, calendar_args(b))
  local n = 0
  local sw, sn = load(key, 2)
  if sw == start then
    n = sn
  end
  save(key, stop - now, 2, start, math.min(n + cost, 2 * count))
end

local function charge_sliding_calendar(key, now, count, _, _, cost, b)
  local pstart, start, _, nstop = calendar_span(now, calendar_args(b))
  local curr, prev = 0, 0
  local sw, sc, sp = load(key, 3)
  if sw == start then
    curr, prev = sc, sp
  elseif sw == pstart then
    prev = sc
  end
  save(key, nstop - now, 3, start, math.min(curr + cost, 2 * count), prev)
end
