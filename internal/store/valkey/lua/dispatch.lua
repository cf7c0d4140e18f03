-- rlproxy decision script, part 3 of 3: the dispatcher.
-- KEYS: one key per check, all distinct. ARGV[1] = now (Unix ms; 0 = the
-- server's TIME), ARGV[2] = mode: 0 decide (charge all or none), 1 check
-- (decide, write nothing; accepted checks report their cost-0 values), 2
-- refund (undo a charge made at now, refund_<name>; reply {now}), 3 charge
-- (unconditionally, charge_<name>; reply {now}), 4 allot (below); ARGV[3] = n, the number
-- of identical requests to decide one after another at now (1 to 1000; 1
-- in modes 2 and 3); then 8 per check: kind, Count, Period, Burst, Delay,
-- NoDelay (0/1), cost, lease id. The kind is an algo.Kind, or from
-- calendar_kinds on a calendar window's, whose check carries calendar
-- boundaries in Period to NoDelay and the lease slot (calendar_span); the
-- generated function algorithm(kind) returns its functions.
-- Reply: {now, then per request, per check allowed, remaining,
-- retryAfter, wait, resetAfter}.
local nargs = 8
if #ARGV ~= 3 + nargs * #KEYS then
  return redis.error_reply('ERR rlproxy: ' .. #ARGV .. ' args for ' .. #KEYS .. ' keys, want 3+8 per key')
end
local mode = ARGV[2]
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[3])
if not n or n < 1 or n > 1000 or n % 1 ~= 0 or ((mode == '2' or mode == '3') and n ~= 1) then
  return redis.error_reply('ERR rlproxy: ' .. ARGV[3] .. ' requests to decide')
end
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
for i = 1, #KEYS do
  local kind = ARGV[4 + (i - 1) * nargs]
  local k = tonumber(kind)
  if not k or k < 1 or k > kinds or k % 1 ~= 0 then
    return redis.error_reply('ERR rlproxy: unknown algorithm kind ' .. kind)
  end
end

-- check returns check i's values: kind, Count, Period, Burst, Delay,
-- NoDelay (boolean; a number for the calendar kinds), cost, lease id.
local function check(i)
  local b = 3 + (i - 1) * nargs
  local kind, nodelay = tonumber(ARGV[b + 1]), ARGV[b + 6]
  if kind < calendar_kinds then
    nodelay = nodelay == '1'
  else
    nodelay = tonumber(nodelay)
  end
  return kind, tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4]),
    tonumber(ARGV[b + 5]), nodelay, tonumber(ARGV[b + 7]), ARGV[b + 8]
end

-- Mode 4 takes an allotment (package allotment): one check whose cost
-- slot holds the units wanted, and ARGV[3] (n) the largest part of what
-- is left to grant, in thousandths. The generated function allotter(kind)
-- returns the kind's allot_<name>, nil when it takes no allotments.
-- Reply: {now, granted, left after them, resetAfter}.
if mode == '4' then
  local f = #KEYS == 1 and allotter(tonumber(ARGV[4]))
  if not f then
    return redis.error_reply('ERR rlproxy: an allotment takes one check of an algorithm that slices')
  end
  local kind, count, period, burst, delay, nodelay, want, lease = check(1)
  local grant, left, reset = f(KEYS[1], now, count, period, burst, delay, nodelay, want, lease, n)
  return { now, grant, left, reset }
end

-- settle refunds (mode 2) or charges (mode 3, the cost capped at the
-- check's quota) check i at now, when its cost is above 0.
local function settle(i)
  local kind, count, period, burst, delay, nodelay, cost, lease = check(i)
  local _, refund, charge, quota = algorithm(kind)
  if cost <= 0 then
    return
  elseif mode == '2' then
    refund(KEYS[i], now, count, period, burst, delay, nodelay, cost, lease)
  elseif charge then
    charge(KEYS[i], now, count, period, burst, delay, nodelay, math.min(cost, quota(count, burst)), lease)
  end
end

if mode == '2' or mode == '3' then
  for i = 1, #KEYS do
    settle(i)
  end
  return { now }
end

-- decideWith returns the decision on key at now of a check with the
-- decide and quota functions f and quota (algorithm) and the values that
-- check() returns (the algorithms' five values), charging it when
-- charge is true and it is accepted; peek decides it at cost 0. A cost
-- above the check's quota (q of RateLimit-Policy: requests accepted at one
-- instant from idle, algo.Limit.Quota) can never be accepted: it is
-- refused with the peek's remaining and reset, and no retry time
-- (algo.Limit.Decide). An algorithm that counts leases has no quota_N.
local function decideWith(key, charge, peek, f, quota, count, period, burst, delay, nodelay, cost, lease)
  if peek then
    cost = 0
  elseif quota and cost > quota(count, burst) then
    local _, remaining, _, _, reset = f(key, now, false, count, period, burst, delay, nodelay, 0, lease)
    return 0, remaining, 0, 0, reset
  end
  return f(key, now, charge, count, period, burst, delay, nodelay, cost, lease)
end

-- decide is decideWith for check i.
local function decide(i, charge, peek)
  local kind, count, period, burst, delay, nodelay, cost, lease = check(i)
  local f, _, _, quota = algorithm(kind)
  return decideWith(KEYS[i], charge, peek, f, quota, count, period, burst, delay, nodelay, cost, lease)
end

-- One request, one check to charge (a route with one policy, the common
-- case): one pass.
if n == 1 and #KEYS == 1 and mode == '0' then
  local allowed, remaining, retry, wait, reset = decide(1, true, false)
  return { now, allowed, remaining, retry, wait, reset }
end

-- n identical requests (concurrent requests of one client, batched by the
-- proxy) are decided in turn, exactly as n runs at the same now would
-- decide them, each seeing the charges of those before it; the states
-- stay in the script until the end (writeback).
if n > 1 then
  writeback()
end
local out = { now }
local key1, f, quota, count, period, burst, delay, nodelay, cost, lease
if #KEYS == 1 and mode == '0' then -- parsed once for all n
  local kind, decide1, _, _, quota1
  key1 = KEYS[1]
  kind, count, period, burst, delay, nodelay, cost, lease = check(1)
  decide1, _, _, quota1 = algorithm(kind)
  f, quota = decide1, quota1
end
for r = 0, n - 1 do
  local base = 1 + r * 5 * #KEYS
  if key1 then
    out[base + 1], out[base + 2], out[base + 3], out[base + 4], out[base + 5] =
      decideWith(key1, true, false, f, quota, count, period, burst, delay, nodelay, cost, lease)
  else
    -- Phase 1: every decision, reads only.
    local all = true
    for i = 1, #KEYS do
      local o = base + (i - 1) * 5
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = decide(i, false, false)
      all = all and out[o + 1] == 1
    end
    -- Phase 2: charge only if every check accepted (mode 0): each is
    -- decided again, now charging, from the same state (the keys are
    -- distinct, and nothing was written in phase 1), so its reply stays
    -- phase 1's. Otherwise the accepted checks report their uncharged
    -- (cost 0) state.
    for i = 1, #KEYS do
      local o = base + (i - 1) * 5
      if all and mode == '0' then
        decide(i, true, false)
      elseif out[o + 1] == 1 and tonumber(ARGV[(i - 1) * nargs + 10]) > 0 then
        out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = decide(i, false, true)
      end
    end
  end
end
if n > 1 then
  flush()
end
return out
