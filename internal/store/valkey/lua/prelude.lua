-- rlproxy decision script, part 1 of 3: shared helpers. The Go side
-- (script.go) concatenates prelude.lua, one file per algorithm
-- (<name>.lua, name as package algo's descriptor spells it, each the body
-- of a function unit_<name> that returns its functions, so a run creates
-- the closures of the algorithms it uses only), the dispatch function it
-- generates from those descriptors and dispatch.lua into ONE script, run
-- once per decision (EVALSHA). The arithmetic is
-- docs/DESIGN.md "Decision arithmetic": integers held in Lua doubles,
-- every intermediate below 2^53, so it agrees with internal/algo.
--
-- An algorithm's file defines, for its name N:
--   N(key, now, charge, count, period, burst, delay, nodelay, cost, lease)
--     -> allowed (1/0), remaining, retryAfter, wait, resetAfter
--   refund_N(key, now, count, period, burst, delay, nodelay, cost, lease)
--   charge_N(key, now, count, period, burst, delay, nodelay, cost, lease)
--   quota_N(count, burst) -> q of RateLimit-Policy (algo.Limit.Quota)
-- with the check's values as arguments (dispatch.lua parses ARGV) and the
-- decision as five return values. N writes the key only when charge is
-- true and it accepts a cost > 0; otherwise it only reads. refund_N undoes
-- the charge of cost that N wrote at now, keeping the key's expiry;
-- charge_N adds cost (at most the quota) unconditionally, as algo's
-- Refund and ForceCharge do. An algorithm without unconditional charges
-- (algo.Algorithm.Charges) has no charge_N, one that counts leases no
-- quota_N. An algorithm that takes calendar periods defines N_calendar,
-- refund_N_calendar and charge_N_calendar too, with the periods in the
-- period to nodelay and lease slots (calendar_span). Arguments and results
-- travel on the Lua stack, not in tables: the script runs on every
-- request, and each table or closure it builds costs the server an
-- allocation and garbage collection (bench/RESULTS.md, "Valkey").

-- fdiv is floor(a/b) for integers, exact even where the double quotient
-- rounds up to the next integer.
local function fdiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

-- muldiv is floor(a*b/d) and whether a*b is not a multiple of d, for
-- integers a, b >= 0, d > 0 with a <= d or b <= d (algo's mulDiv): exact
-- where a*b itself passes 2^53 (a count of 10^12 times a window in ms).
-- Then a*b = qa*d*b + ra*b with ra = a mod d, and ra*b is built by Horner's
-- rule over 8-bit chunks of b, reduced mod d at each step: every
-- intermediate stays below 512*d < 2^53 (d < 2^41: a window in ms, or a
-- count below 2*10^12).
local function muldiv(a, b, d)
  local p = a * b
  if p < 9007199254740992 then -- 2^53: the double product is exact
    local q = fdiv(p, d)
    return q, p ~= q * d
  end
  local qa = fdiv(a, d)
  local ra = a - qa * d
  local s, rest = 1, b
  while s * 256 <= b do
    s = s * 256
  end
  local qq, rr = 0, 0 -- ra*(the chunks of b so far) = qq*d + rr
  while s >= 1 do
    local c = fdiv(rest, s)
    rest = rest - c * s
    local t = rr * 256 + ra * c
    local tq = fdiv(t, d)
    qq, rr = qq * 256 + tq, t - tq * d
    s = s / 256
  end
  return qa * b + qq, rr ~= 0
end

-- cdiv is ceil(a/b) = floor((a+b-1)/b) (DESIGN.md), for a >= 0, b > 0.
local function cdiv(a, b)
  return fdiv(a + b - 1, b)
end

-- int formats an integer-valued double for a command argument: tostring
-- would give "1e+12" for Unix milliseconds.
local function int(x)
  return string.format('%d', x)
end

-- packed[n] is the struct format of a state of n little-endian doubles.
local packed = { '<d', '<dd', '<ddd' }

-- wb, when set (writeback), holds every state this run has read or
-- saved: key -> {d1, d2, d3, n = doubles (nil: no key), ttl = expiry ms
-- (nil: not saved)}. A run that decides several identical requests
-- (dispatch.lua, ARGV[3] > 1) reads each key once and writes each saved
-- key once, at the end (flush), instead of a GET (and a pack and a SET)
-- per request; nil = read and write through.
local wb

local function writeback()
  wb = {}
end

-- load returns the n doubles of a packed state (or its m doubles, when m
-- is given and the state has m); nothing (nil) when the key is missing
-- (missing state = idle state).
local function load(key, n, m)
  local s = wb and wb[key]
  if s then
    if s.n then
      return s[1], s[2], s[3]
    end
    return nil
  end
  local v = redis.call('GET', key)
  if not v then
    if wb then
      wb[key] = {}
    end
    return nil
  end
  if m and #v == 8 * m then
    n = m
  elseif #v ~= 8 * n then
    error('rlproxy: state of ' .. key .. ' is ' .. #v .. ' bytes, want ' .. 8 * n)
  end
  if wb then
    local a, b, c = struct.unpack(packed[n], v)
    if n == 2 then
      c = nil -- struct.unpack's next position
    end
    wb[key] = { a, b, c, n = n }
    return a, b, c
  end
  if m and n == 2 then
    local a, b = struct.unpack(packed[2], v)
    return a, b -- not struct.unpack's next position: the caller reads a third
  end
  return struct.unpack(packed[n], v)
end

-- save writes the n doubles a, b[, c] as a packed state with an expiry of
-- ttl ms (at least 1): the key disappears exactly when its state has
-- become idle.
local function save(key, ttl, n, a, b, c)
  if wb then
    local s = wb[key]
    if not s then
      s = {}
      wb[key] = s
    end
    s[1], s[2], s[3], s.n, s.ttl = a, b, c, n, ttl
    return
  end
  redis.call('SET', key, struct.pack(packed[n], a, b, c), 'PX', int(math.max(ttl, 1)))
end

-- flush writes the states saved since writeback. Every save of a run is at
-- the same now, so the last one's expiry is the right one.
local function flush()
  for key, s in pairs(wb) do
    if s.ttl then
      redis.call('SET', key, struct.pack(packed[s.n], s[1], s[2], s[3]), 'PX', int(math.max(s.ttl, 1)))
    end
  end
end

-- unsave rewrites a packed state of n doubles, keeping the key's expiry
-- (refunds: the refunded state is idle no later than the charged one).
local function unsave(key, n, ...)
  redis.call('SET', key, struct.pack(packed[n], ...), 'KEEPTTL')
end

-- score reads the score of a one-element WITHSCORES reply, nil when empty.
local function score(reply)
  if reply[2] then
    return tonumber(reply[2])
  end
  return nil
end

-- calendar_span returns the calendar period containing now and its
-- neighbours: previous start, start, end, next end. A calendar check
-- (algo.Limit.Calendar) carries periods of a time zone's calendar that Go
-- computes (algo.Calendar.SpanAt, time/tzdata), in its period, burst,
-- delay and nodelay slots and its lease slot: six consecutive period
-- starts b0 < ... < b5 around Go's clock (Go's now in [b2, b3)), as b0,
-- b1, b2, b3 and "b4:b5". The script's own now (TIME) may lie a period
-- either way. Its state is the algorithm's, with a period's start ms as
-- the window id.
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
