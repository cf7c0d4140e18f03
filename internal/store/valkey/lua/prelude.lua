-- rlproxy decision script, part 1 of 3: shared helpers and the algorithm
-- table. The Go side concatenates prelude.lua, one file per algorithm and
-- dispatch.lua into ONE script, run once per decision (EVALSHA). The
-- arithmetic is docs/DESIGN.md "Decision arithmetic": integers held in Lua
-- doubles, every intermediate below 2^53, so it agrees with internal/algo.

-- A[kind](key, c, now) -> d, write. kind numbers are algo.Kind values.
-- c = {count, period, burst, delay, nodelay, cost, lease}; d = {allowed
-- (1/0), remaining, retryAfter, wait, resetAfter}; write is a function that
-- charges the check (phase 2) or nil when nothing is written (refusal, peek).
-- The functions only read; all writes happen in the returned closure.
local A = {}

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

-- cdiv is ceil(a/b) = floor((a+b-1)/b) (DESIGN.md), for a >= 0, b > 0.
local function cdiv(a, b)
  return fdiv(a + b - 1, b)
end

-- int formats an integer-valued double for a command argument: tostring
-- would give "1e+12" for Unix milliseconds.
local function int(x)
  return string.format('%d', x)
end

-- load reads a state string of n packed little-endian doubles; nil when
-- the key is missing (missing state = idle state).
local function load(key, n)
  local v = redis.call('GET', key)
  if not v then
    return nil
  end
  if #v ~= 8 * n then
    error('rlproxy: state of ' .. key .. ' is ' .. #v .. ' bytes, want ' .. 8 * n)
  end
  return { struct.unpack('<' .. string.rep('d', n), v) }
end

-- save writes packed doubles with an expiry of ttl ms (at least 1): the key
-- disappears exactly when its state has become idle.
local function save(key, ttl, ...)
  local vals = { ... }
  redis.call('SET', key, struct.pack('<' .. string.rep('d', #vals), ...), 'PX', int(math.max(ttl, 1)))
end

-- score reads the score of a one-element WITHSCORES reply, nil when empty.
local function score(reply)
  if reply[2] then
    return tonumber(reply[2])
  end
  return nil
end
