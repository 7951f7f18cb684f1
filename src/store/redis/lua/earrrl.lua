-- earrrl: as src/core/earrrl.cc. State {n, t}: the impulse n at t (relative to the base).
local function ceil_ns(x) -- a whole number of nanoseconds, as src/core/numeric.h's
  if not (x > 0) then return 0 end
  if x >= MAX_NS then return MAX_NS end
  return math.ceil(x)
end
local function decide(keys, args)
  local bad = begin(keys, args)
  if bad then return bad end
  read_state('dd', nil, true)
  local lambda, rate, n_saturate = param(5), param(6), param(7)
  local n_forget, window_ns, limit = param(8), param(9), param(10)
  local count_refused = args[11] == '1'
  local inv_n_forget, inv_lambda = param(12), param(13) -- reset_after multiplies, as the C++ does
  local n, t = 0, 0
  if st then n, t = st[1], st[2] end
  local n_before = 0
  if n ~= 0 then
    local dt = now - t
    if dt < 0 then dt = 0 end -- a clock that goes backwards does not make the estimate grow
    n_before = n * math.exp(-lambda * dt)
    if n_before < n_forget then n_before = 0 end -- forgettable counts as nothing, as src/core/earrrl.cc
  end
  local estimate = n_before * lambda
  local allowed = not (estimate > rate)
  local n_after = n_before
  if allowed or count_refused then n_after = math.min(1e300, n_before + cost) end
  local new_t = now
  if n_before ~= 0 then new_t = math.max(t, now) end
  local remaining = math.max(0, n_saturate - n_after)
  local lead = new_t - now -- waits count from the impulse, which a clock that went backwards left ahead of now
  local retry = 0
  if not allowed then
    -- The wait passes the later attempt's test on this attempt's state (a check's) and on the one before it (a
    -- peek's), which round differently: as src/core/earrrl.cc.
    local wait = ceil_ns(math.log(n_after / n_saturate) / lambda) + 1
    for _ = 1, 16 do
      local dt = new_t + wait - t
      if dt < 0 then dt = 0 end
      local old = n * math.exp(-lambda * dt)
      if old < n_forget then old = 0 end
      if not (n_after * math.exp(-lambda * wait) * lambda > rate or old * lambda > rate) then break end
      wait = wait + math.max(1, math.floor(wait / 1125899906842624)) -- 2^50
    end
    retry = wait + lead
  end
  local reset = 0
  if n_after > n_forget then reset = ceil_ns(math.log(n_after * inv_n_forget) * inv_lambda) + lead end
  return finish(allowed, limit, remaining, retry, reset, 0, estimate * window_ns, {n_after, new_t + shift})
end
-- Gives back `amount` of a charge made at (c_us, c_r) (a reservation settled for less), as src/core/earrrl.cc's
-- earrrl_refund: the impulse loses what the amount still adds to it, decayed since the charge, never below 0. On the
-- state as read_state leaves it; true when it changed st (lua/reservations.lua writes it back).
local function refund(amount, c_us, c_r)
  read_state('dd', nil, true)
  if not st or amount == 0 then return false end
  local lambda, n_forget = param(5), param(8)
  local n, t = st[1], st[2]
  local n_before = 0
  if n ~= 0 then
    local dt = now - t
    if dt < 0 then dt = 0 end
    n_before = n * math.exp(-lambda * dt)
    if n_before < n_forget then n_before = 0 end
  end
  if n_before == 0 then return false end
  local dt = (now_us - c_us) * 1000 + (now_r - c_r)
  if dt < 0 then dt = 0 end
  local left = n_before - amount * math.exp(-lambda * dt)
  if not (left > 0) then left = 0 end
  st[1], st[2] = left, math.max(t, now)
  return true
end
