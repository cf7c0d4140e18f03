-- Sliding log (algo's sliding_log.go). A sorted set of accepted requests:
-- score = ms, member = "<ms>:<i>" with i = ZCOUNT at that score, unique even
-- for requests in one millisecond. Entries count while t > now - W.

-- sl_add adds k entries at now.
local function sl_add(key, now, k)
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
end

local function sliding_log(key, now, charge, count, W, _, _, _, cost)
  local lo = '(' .. int(now - W)
  local n = redis.call('ZCOUNT', key, lo, '+inf')
  local newest = 0
  if n > 0 then
    newest = score(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES'))
  end
  if n + cost <= count then
    local level = n + cost
    if cost > 0 then
      newest = math.max(newest, now)
      if charge then
        redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now - W))
        sl_add(key, now, cost)
        redis.call('PEXPIRE', key, int(math.max(newest + W - now, 1)))
      end
    end
    local reset = 0
    if level > 0 then
      reset = newest + W - now
    end
    return 1, count - level, 0, 0, reset
  end
  local reset = 0
  if n > 0 then
    reset = newest + W - now
  end
  -- The k-th oldest live entry must leave before the same cost fits.
  local k = n + cost - count
  local retry = reset
  if k <= n then
    local tk = score(redis.call('ZRANGEBYSCORE', key, lo, '+inf', 'WITHSCORES', 'LIMIT', k - 1, 1))
    retry = tk + W - now
  end
  return 0, math.max(count - n, 0), retry, 0, reset
end

-- Drop the cost newest entries at now.
local function refund_sliding_log(key, now, _, _, _, _, _, cost)
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

-- cost entries at now, up to count live entries (the log's memory stays
-- bounded by the limit).
local function charge_sliding_log(key, now, count, W, _, _, _, cost)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now - W))
  sl_add(key, now, math.min(cost, count - redis.call('ZCARD', key)))
  -- The expiry is set again even when the log was full: the key is idle
  -- when its newest entry leaves, as the memory store records it.
  local newest = score(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES'))
  if newest then
    redis.call('PEXPIRE', key, int(math.max(newest + W - now, 1)))
  end
end

local function quota_sliding_log(count)
  return count
end
