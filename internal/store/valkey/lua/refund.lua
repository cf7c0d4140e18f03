-- rlproxy decision script, refunds (mode 2 of dispatch.lua). On a Valkey
-- Cluster a decision whose keys lie in several hash slots runs one script
-- per slot group (valkey.go, Store.Decide); when a later group refuses,
-- the groups already charged are refunded here at the same now: each
-- function undoes exactly the charge of cost c that A[kind] wrote at now,
-- whatever other requests charged since, and keeps the key's TTL (the
-- refunded state is idle no later than the charged one).
-- U[kind](key, c, now); kinds as in A.
local U = {}

-- unsave rewrites a packed-double state, keeping the key's expiry.
local function unsave(key, ...)
  local vals = { ... }
  redis.call('SET', key, struct.pack('<' .. string.rep('d', #vals), ...), 'KEEPTTL')
end

U[1] = function(key, c, now) -- fixed window: n -= c in the same window
  local s = load(key, 2)
  if s and s[1] == fdiv(now, c.period) then
    unsave(key, s[1], math.max(s[2] - c.cost, 0))
  end
end

U[2] = function(key, c, now) -- sliding log: drop the c newest entries at now
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
  for j = 1, math.min(c.cost, #ids) do
    redis.call('ZREM', key, ms .. ':' .. int(ids[j]))
  end
end

U[3] = function(key, c, now) -- sliding window: curr (or prev, if the window moved on) -= c
  local s = load(key, 3)
  if not s then
    return
  end
  local cw = fdiv(now, c.period)
  if s[1] == cw then
    unsave(key, s[1], math.max(s[2] - c.cost, 0), s[3])
  elseif s[1] == cw + 1 then
    unsave(key, s[1], s[2], math.max(s[3] - c.cost, 0))
  end
end

U[4] = function(key, c, now) -- token bucket: give the c tokens back (deficit -= c)
  local s = load(key, 2)
  if s then
    unsave(key, math.max(s[1] - c.cost * c.period, 0), s[2])
  end
end

U[5] = function(key, c, now) -- leaky bucket: take the c requests' water out
  local s = load(key, 2)
  if s then
    unsave(key, math.max(s[1] - c.cost * c.period, -c.period), s[2])
  end
end

U[6] = function(key, c, now) -- concurrency: drop the lease
  if c.lease ~= '' then
    redis.call('ZREM', key, c.lease)
  end
end
