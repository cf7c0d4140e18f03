-- Concurrency (algo's concurrency.go). A sorted set of leases: member =
-- lease id, score = expiry ms. A lease is live while expiry > now. Any
-- cost > 0 acquires or refreshes one lease; without a lease id it peeks.
local function concurrency(key, now, charge, count, period, _, _, _, cost, lease)
  if lease == '' then
    cost = 0
  end
  local live = '(' .. int(now)
  local held = redis.call('ZCOUNT', key, live, '+inf')
  local mine = tonumber(redis.call('ZSCORE', key, lease) or 0)
  local has = mine > now
  local latest = 0
  if held > 0 then
    latest = score(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES'))
  end
  if has or held < count then
    local after = held
    if cost > 0 then
      local exp = now + period
      if not has then
        after = held + 1
      end
      -- The refreshed lease may have been the latest one.
      local others = redis.call('ZREVRANGE', key, 0, 1, 'WITHSCORES')
      latest = exp
      for j = 1, #others, 2 do
        if others[j] ~= lease then
          latest = math.max(latest, tonumber(others[j + 1]))
          break
        end
      end
      if charge then
        redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now))
        redis.call('ZADD', key, int(exp), lease)
        redis.call('PEXPIRE', key, int(math.max(latest - now, 1)))
      end
    end
    local reset = 0
    if after > 0 then
      reset = latest - now
    end
    return 1, math.max(count - after, 0), 0, 0, reset
  end
  local earliest = score(redis.call('ZRANGEBYSCORE', key, live, '+inf', 'WITHSCORES', 'LIMIT', 0, 1))
  return 0, 0, math.max(earliest - now, 1), 0, latest - now
end

-- Drop the request's lease. Concurrency has no unconditional charge and no
-- quota: a cost > 0 acquires one lease, whatever the cost.
local function refund_concurrency(key, _, _, _, _, _, _, _, lease)
  if lease ~= '' then
    redis.call('ZREM', key, lease)
  end
end
