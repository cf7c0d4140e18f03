-- Sliding log (algo.SlidingLog = 2). A sorted set of accepted requests:
-- score = ms, member = "<ms>:<i>" with i = ZCOUNT at that score, unique even
-- for requests in one millisecond. Entries count while t > now - W.
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
        local ms = int(now)
        local i = redis.call('ZCOUNT', key, ms, ms)
        local args = {}
        for j = 0, cost - 1 do
          args[#args + 1] = ms
          args[#args + 1] = ms .. ':' .. int(i + j)
          if #args >= 400 or j == cost - 1 then -- bounded unpack size
            redis.call('ZADD', key, unpack(args))
            args = {}
          end
        end
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
