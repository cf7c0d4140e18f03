-- Token bucket (algo's token_bucket.go). State {D, L} as 2 doubles: the
-- deficit (tokens taken and not yet refilled) in units (one request = P
-- units, refill R units/ms) and last ms. Idle = no key = full. Keeping the
-- deficit, not the tokens, makes a raised burst admit at once after a reload
-- (docs/CONTRACT.md "Reload"); a deficit beyond the capacity empties the
-- bucket. A debt left by an unconditional charge (charge_token_bucket) is
-- stored as D < 0: the bucket is empty and owes -D more, whatever the burst.

-- tb_deficit is the deficit of a stored D (algo's tokenDeficit): a lowered
-- burst empties the bucket without debt; a debt stays.
local function tb_deficit(D, BP)
  if D < 0 then
    return BP - D
  end
  return math.min(D, BP)
end

-- tb_encode is the D that tb_deficit reads back as deficit X (algo's
-- encodeDeficit).
local function tb_encode(X, BP)
  if X > BP then
    return BP - X
  end
  return X
end

-- tb_level returns the tokens at now in units (BP: full) of the state at
-- key and the ms the refill runs from (algo's tokenLevel).
local function tb_level(key, now, R, BP)
  local D, SL = load(key, 2)
  if not D then
    return BP, now
  end
  D = tb_deficit(D, BP)
  local elapsed = math.min(math.max(now - SL, 0), cdiv(D, R))
  return BP - math.max(D - elapsed * R, 0), math.max(SL, now)
end

local function token_bucket(key, now, charge, R, P, burst, _, _, cost)
  local BP = burst * P
  local T, L = tb_level(key, now, R, BP)
  local need = cost * P
  if T >= need then
    local level = T - need
    local reset = cdiv(BP - level, R)
    if charge and cost > 0 then
      -- The refill runs from L, which may lie ahead of now on replay.
      save(key, L - now + reset, 2, BP - level, L)
    end
    return 1, fdiv(level, P), 0, 0, reset
  end
  return 0, fdiv(math.max(T, 0), P), cdiv(need - T, R), 0, cdiv(BP - T, R)
end

-- Give the tokens back (deficit -= cost), repaying a debt first.
local function refund_token_bucket(key, _, _, P, burst, _, _, cost)
  local D, L = load(key, 2)
  if D and D < 0 then
    local BP = burst * P
    unsave(key, 2, tb_encode(math.max(tb_deficit(D, BP) - cost * P, 0), BP), L)
  elseif D then
    unsave(key, 2, math.max(D - cost * P, 0), L)
  end
end

-- Take the tokens, down to -burst (a debt).
local function charge_token_bucket(key, now, R, P, burst, _, _, cost)
  local BP = burst * P
  local T, L = tb_level(key, now, R, BP)
  local level = math.max(T - cost * P, -BP)
  save(key, L - now + cdiv(BP - level, R), 2, tb_encode(BP - level, BP), L)
end

local function quota_token_bucket(_, burst)
  return burst
end

-- Take a slice: at most want tokens and at most permille/1000 of the
-- whole tokens there are, at once. Returns the tokens granted, the whole
-- tokens left after them and the ms until the bucket is full again.
local function allot_token_bucket(key, now, R, P, burst, _, _, want, _, permille)
  local BP = burst * P
  local T, L = tb_level(key, now, R, BP)
  local left = fdiv(math.max(T, 0), P)
  local grant = math.min(want, fdiv(left * permille, 1000))
  local level = T - grant * P
  local reset = cdiv(BP - level, R)
  if grant > 0 then
    save(key, L - now + reset, 2, BP - level, L)
  end
  return grant, left - grant, reset
end
