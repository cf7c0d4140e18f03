-- rlproxy decision script, part 3 of 3: the dispatcher.
-- KEYS: one key per check. ARGV[1] = now (Unix ms; 0 = the server's TIME),
-- ARGV[2] = mode: 0 decide (charge all or none), 1 check (decide, write
-- nothing; accepted checks report their cost-0 values), 2 refund (undo a
-- charge made at now, refund.lua; reply {now}); then 8 per check: kind, Count, Period, Burst, Delay, NoDelay (0/1), cost,
-- lease id. Reply: {now, then per check allowed, remaining, retryAfter,
-- wait, resetAfter}.
local nargs = 8
if #ARGV ~= 2 + nargs * #KEYS then
  return redis.error_reply('ERR rlproxy: ' .. #ARGV .. ' args for ' .. #KEYS .. ' keys, want 2+8 per key')
end
local mode = ARGV[2]
local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- quota is q of RateLimit-Policy: requests accepted at one instant from
-- idle (algo.Limit.Quota); a larger cost can never be accepted.
local function quota(kind, c)
  if kind == 4 then
    return c.burst
  elseif kind == 5 then
    return c.burst + 1
  end
  return c.count
end

if mode == '2' then
  for i = 1, #KEYS do
    local b = 2 + (i - 1) * nargs
    local f = U[tonumber(ARGV[b + 1])]
    if f and tonumber(ARGV[b + 7]) > 0 then
      f(KEYS[i], {
        count = tonumber(ARGV[b + 2]),
        period = tonumber(ARGV[b + 3]),
        burst = tonumber(ARGV[b + 4]),
        cost = tonumber(ARGV[b + 7]),
        lease = ARGV[b + 8],
      }, now)
    end
  end
  return { now }
end

-- Phase 1: every decision, reads only.
local checks, ds, writes = {}, {}, {}
local all = true
for i = 1, #KEYS do
  local b = 2 + (i - 1) * nargs
  local kind = tonumber(ARGV[b + 1])
  local f = A[kind]
  if not f then
    return redis.error_reply('ERR rlproxy: unknown algorithm kind ' .. ARGV[b + 1])
  end
  local c = {
    count = tonumber(ARGV[b + 2]),
    period = tonumber(ARGV[b + 3]),
    burst = tonumber(ARGV[b + 4]),
    delay = tonumber(ARGV[b + 5]),
    nodelay = ARGV[b + 6] == '1',
    cost = tonumber(ARGV[b + 7]),
    lease = ARGV[b + 8],
  }
  checks[i] = { f, c }
  if kind ~= 6 and c.cost > quota(kind, c) then
    -- Never acceptable: refused with the peek's remaining and reset, and
    -- no retry time (algo.Limit.Decide).
    local cost = c.cost
    c.cost = 0
    local d = f(KEYS[i], c, now)
    c.cost = cost
    ds[i] = { 0, d[2], 0, 0, d[5] }
  else
    ds[i], writes[i] = f(KEYS[i], c, now)
  end
  if ds[i][1] == 0 then
    all = false
  end
end

-- Phase 2: charge only if every check accepted (mode 0); otherwise the accepted
-- checks report their uncharged (cost 0) state.
local out = { now }
for i = 1, #KEYS do
  local d = ds[i]
  if all and mode == '0' then
    if writes[i] then
      writes[i]()
    end
  elseif d[1] == 1 and checks[i][2].cost > 0 then
    checks[i][2].cost = 0
    d = checks[i][1](KEYS[i], checks[i][2], now)
  end
  for j = 1, 5 do
    out[#out + 1] = d[j]
  end
end
return out
