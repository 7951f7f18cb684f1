-- gcra and leaky_queue: as src/core/gcra.cc. State {tat} (relative to the base).
local function decide(keys, args)
  local bad = begin(keys, args)
  if bad then return bad end
  read_state('d', nil, true)
  local interval, tolerance, limit, queue, max_backlog = param(5), param(6), param(7), args[8] == '1', param(9)
  local tat = now
  if st then tat = math.max(st[1], now) end
  local increment = cost * interval
  local new_tat = tat + increment
  local allow_at = new_tat - tolerance
  local allowed, retry, ttl, delay, state = false, 0, 0, 0, nil
  if increment <= tolerance and allow_at <= now then
    allowed = true
    ttl = new_tat - now
    if queue then delay = tat - now end
    state = {new_tat + shift}
  else
    local held = tat
    if max_backlog > 0 then -- count_refused: owed all the same, up to a debt of one limit (gcra.h)
      held = math.max(tat, math.min(new_tat, now + max_backlog))
      allow_at = held + increment - tolerance
      state = {held + shift}
    elseif st then
      state = {st[1] + shift}
    end
    if increment <= tolerance then retry = allow_at - now else retry = NEVER end
    ttl = held - now
  end
  local room = tolerance - ttl
  local remaining = 0
  if room > 0 then remaining = math.floor(room / interval) end
  return finish(allowed, limit, remaining, retry, ttl, delay, nil, state)
end
-- Gives back `amount` of a charge (a reservation settled for less), as src/core/gcra.cc's gcra_refund: the TAT moves
-- back by amount * T, by no more than what is left of the charge's place in the schedule (`held`: nanoseconds from
-- now to the charge's held_until) and never before now. True when it changed st (lua/reservations.lua).
local function refund(amount, _, _, held)
  read_state('d', nil, true)
  if not st then return false end
  local left = math.min(amount * param(5), held)
  if left <= 0 or st[1] <= now then return false end
  st[1] = math.max(now, st[1] - left)
  return true
end
