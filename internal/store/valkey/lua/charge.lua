-- rlproxy decision script, unconditional charges (mode 3 of dispatch.lua):
-- the cost a response reported beyond what its request was charged when
-- decided (a route's cost_response_header). The Go twin is
-- algo.Limit.ForceCharge; both cap the cost at the check's quota first
-- (dispatch.lua) and the state as described there, so that the values stay
-- below 2^53. Each is f(key, now, count, period, burst, cost) and writes
-- the key with the expiry at which its state is idle.

-- Token bucket: tokens -= cost, down to -burst. A deficit beyond the
-- capacity that a debt leaves is stored as D < 0 (the bucket is empty and
-- owes -D), apart from a plain deficit that a lowered burst clamps.
local function charge_token_bucket(key, now, R, P, burst, cost)
  local BP = burst * P
  local T, L = BP, now
  local D, SL = load(key, 2)
  if D then
    D = tb_deficit(D, BP)
    local elapsed = math.min(math.max(now - SL, 0), cdiv(D, R))
    T = BP - math.max(D - elapsed * R, 0)
    L = math.max(SL, now)
  end
  local level = math.max(T - cost * P, -BP)
  local X = BP - level
  if X > BP then
    X = BP - X
  end
  save(key, L - now + cdiv(BP - level, R), 2, X, L)
end

-- Leaky bucket: excess += cost, up to (burst + quota) requests.
local function charge_leaky_bucket(key, now, R, P, burst, cost)
  local X, L = -P, now
  local E, SL = load(key, 2)
  if E then
    local elapsed = math.min(math.max(now - SL, 0), fdiv(E + P, R) + 1)
    X = math.max(E - elapsed * R, -P)
    L = math.max(SL, now)
  end
  local new = math.min(X + cost * P, (2 * burst + 1) * P)
  save(key, L - now + cdiv(new + P, R), 2, new, L)
end

-- Fixed window: n += cost in now's window, up to 2*count.
local function charge_fixed_window(key, now, count, W, _, cost)
  local cw = fdiv(now, W)
  local n = 0
  local sw, sn = load(key, 2)
  if sw == cw then
    n = sn
  end
  save(key, (cw + 1) * W - now, 2, cw, math.min(n + cost, 2 * count))
end

-- Sliding window counter: curr += cost in now's window, up to 2*count.
local function charge_sliding_window(key, now, count, W, _, cost)
  local cw = fdiv(now, W)
  local curr, prev = 0, 0
  local sw, sc, sp = load(key, 3)
  if sw == cw then
    curr, prev = sc, sp
  elseif sw == cw - 1 then
    prev = sc
  end
  save(key, (cw + 2) * W - now, 3, cw, math.min(curr + cost, 2 * count), prev)
end

-- Sliding log: cost entries at now, up to count live entries.
local function charge_sliding_log(key, now, count, W, _, cost)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now - W))
  local k = math.min(cost, count - redis.call('ZCARD', key))
  local ms = int(now)
  local i = redis.call('ZCOUNT', key, ms, ms)
  local args = {}
  for j = 0, k - 1 do
    args[#args + 1] = ms
    args[#args + 1] = ms .. ':' .. int(i + j)
    if #args >= 400 or j == k - 1 then -- bounded unpack size
      redis.call('ZADD', key, unpack(args))
      args = {}
    end
  end
  -- The expiry is set again even when the log was full: the key is idle
  -- when its newest entry leaves, as the memory store records it.
  local newest = score(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES'))
  if newest then
    redis.call('PEXPIRE', key, int(math.max(newest + W - now, 1)))
  end
end
