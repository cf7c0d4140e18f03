-- rlproxy decision script, refunds (mode 2 of dispatch.lua). On a Valkey
-- Cluster a decision whose keys lie in several hash slots runs one script
-- per slot group (valkey.go, Store.Decide); when a later group refuses,
-- the groups already charged are refunded here at the same now: each
-- function undoes exactly the charge of cost c that the algorithm of the
-- same kind wrote at now, whatever other requests charged since, and keeps
-- the key's TTL (the refunded state is idle no later than the charged one).
-- Each is f(key, now, period, cost, lease, burst) (values of the check's ARGV).

-- unsave rewrites a packed state of n doubles, keeping the key's expiry.
local function unsave(key, n, ...)
  redis.call('SET', key, struct.pack(packed[n], ...), 'KEEPTTL')
end

local function refund_fixed_window(key, now, W, cost) -- n -= c in the same window
  local sw, sn = load(key, 2)
  if sw == fdiv(now, W) then
    unsave(key, 2, sw, math.max(sn - cost, 0))
  end
end

local function refund_sliding_log(key, now, _, cost) -- drop the c newest entries at now
  local ms = int(now)
  local ids = {}
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', key, ms, ms)) do
    local i = tonumber(string.match(m, ':(%d+)$'))
    if i then
      ids[#ids + 1] = i
    end
  end
  -- Members are ms:0..ms:n-1; removing the highest keeps new names unique.
  table.sort(ids, function(a, b) return a > b end)
  for j = 1, math.min(cost, #ids) do
    redis.call('ZREM', key, ms .. ':' .. int(ids[j]))
  end
end

-- sliding window: curr (or prev, if the window moved on) -= c
local function refund_sliding_window(key, now, W, cost)
  local sw, sc, sp = load(key, 3)
  if not sw then
    return
  end
  local cw = fdiv(now, W)
  if sw == cw then
    unsave(key, 3, sw, math.max(sc - cost, 0), sp)
  elseif sw == cw + 1 then
    unsave(key, 3, sw, sc, math.max(sp - cost, 0))
  end
end

-- give the c tokens back (deficit -= c), repaying a debt (D < 0) first
local function refund_token_bucket(key, _, P, cost, _, burst)
  local D, L = load(key, 2)
  if D and D < 0 then
    local BP = burst * P
    local X = math.max(BP - D - cost * P, 0)
    if X > BP then
      X = BP - X
    end
    unsave(key, 2, X, L)
  elseif D then
    unsave(key, 2, math.max(D - cost * P, 0), L)
  end
end

local function refund_leaky_bucket(key, _, P, cost) -- take the c requests' water out
  local E, L = load(key, 2)
  if E then
    unsave(key, 2, math.max(E - cost * P, -P), L)
  end
end

local function refund_concurrency(key, _, _, _, lease) -- drop the lease
  if lease ~= '' then
    redis.call('ZREM', key, lease)
  end
end
