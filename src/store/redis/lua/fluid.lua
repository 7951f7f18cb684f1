-- token_bucket and leaky_bucket: as src/core/fluid.cc. State {empty, frac}: the bucket is empty at empty + frac
-- (relative to the base).
local capacity, interval, tolerance, max_backlog -- this call's, ARGV[5...8]
local function fits(w, f, k) return w <= math.floor(tolerance - k * interval - f) end
local function room_for(w, f) -- the most whole requests that fit (fits is monotone in k)
  local k = math.floor((tolerance - f - w) / interval)
  k = math.max(0, math.min(k, math.floor(capacity)))
  while k > 0 and not fits(w, f, k) do k = k - 1 end
  while k + 1 <= capacity and fits(w, f, k + 1) do k = k + 1 end
  return k
end
local function decide(keys, args)
  local bad = begin(keys, args)
  if bad then return bad end
  read_state('dd', nil, true)
  capacity, interval, tolerance, max_backlog = param(5), param(6), param(7), param(8)
  local whole, frac = 0, 0 -- the backlog at now: whole nanoseconds until empty, and the fraction
  if st and st[1] >= now then whole, frac = st[1] - now, st[2] end
  local most = math.floor(tolerance - cost * interval - frac)
  local allowed = cost <= capacity and whole <= most
  local retry, state = 0, nil
  if allowed then
    local x = frac + cost * interval
    local xw = math.floor(x)
    whole, frac = whole + xw, x - xw
    state = {now + whole + shift, frac}
  elseif max_backlog > 0 then -- count_refused: owed all the same, up to max_backlog (fluid.cc's owe)
    local x = frac + cost * interval
    if whole + x > max_backlog then
      if whole + frac < max_backlog then
        local w = math.floor(max_backlog)
        whole, frac = w, max_backlog - w
      end
    else
      local xw = math.floor(x)
      whole, frac = whole + xw, x - xw
    end
    state = {now + whole + shift, frac}
    if cost <= capacity then retry = whole - math.floor(tolerance - cost * interval - frac) else retry = NEVER end
  else
    if cost <= capacity then retry = whole - most else retry = NEVER end
    if st then state = {st[1] + shift, st[2]} end
  end
  local reset = whole
  if frac > 0 then reset = reset + 1 end
  return finish(allowed, capacity, room_for(whole, frac), retry, reset, 0, nil, state)
end
-- Gives back `amount` of a charge (a reservation settled for less), as src/core/fluid.cc's fluid_refund: the level
-- goes down by amount, by no more than what is left of the charge in the backlog (`held`: nanoseconds from now to
-- the charge's held_until), never below empty. True when it changed st (lua/reservations.lua).
local function refund(amount, _, _, held)
  read_state('dd', nil, true)
  if not st then return false end
  local whole, frac = 0, 0
  if st[1] >= now then whole, frac = st[1] - now, st[2] end
  local left = math.min(amount * param(6), held)
  if not (left > 0) or (whole == 0 and frac == 0) then return false end
  local x = whole + frac - left
  if not (x > 0) then
    st[1], st[2] = now, 0
    return true
  end
  local w = math.floor(x)
  st[1], st[2] = now + w, x - w
  return true
end
