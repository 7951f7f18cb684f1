-- sliding_log: as src/core/sliding_log.cc. State {t1, c1, t2, c2, ...}, oldest first (times relative to the base):
-- c_i requests counted at t_i. The log is worked on in the one table read_state gives, entries dropped in place.
-- Its window and limit are ARGV[5...7] as windows.lua reads them (algorithm_scripts.cc's WindowParams); none of windows.lua's
-- functions is needed here, so it is not part of this library.
local function decide(keys, args)
  local bad = begin(keys, args)
  if bad then return bad end
  local window, limit = param(5) * 1000 + param(6), param(7)
  read_state('', 'dd', true)
  local log, sum = st or {}, 0 -- log[2i - 1], log[2i]: t_i, c_i
  local m = #log / 2
  for i = 2, #log, 2 do sum = sum + log[i] end
  local first = 1 -- entries before it have left the window
  while first <= m and log[2 * first - 1] + window <= now do
    sum = sum - log[2 * first]
    first = first + 1
  end
  local used = sum
  local allowed = used <= limit and cost <= limit - used
  local retry = 0
  local count_refused = args[8] == '1'
  if allowed or (count_refused and cost > 0 and used < 2 * limit) then
    local add = cost
    if not allowed then add = math.min(cost, 2 * limit - used) end -- owed: the sum up to twice the limit
    if add > 0 then
      local t = now
      if m >= first then t = math.max(now, log[2 * m - 1]) end
      if m >= first and log[2 * m - 1] == t then
        log[2 * m] = log[2 * m] + add
      else
        m = m + 1
        log[2 * m - 1], log[2 * m] = t, add
      end
      sum = sum + add
    end
  end
  if allowed then -- nothing to wait for
  elseif cost > limit then
    retry = NEVER
  else
    local freed = 0
    for i = first, m do
      freed = freed + log[2 * i]
      if sum - freed <= limit - cost then
        retry = math.max(0, log[2 * i - 1] + window - now)
        break
      end
    end
  end
  local remaining = 0
  if sum < limit then remaining = limit - sum end
  local reset = 0
  if m >= first then reset = math.max(0, log[2 * m - 1] + window - now) end
  -- The entries still in the window, moved to the front with their times made relative to now_us; the rest dropped.
  local gone = 2 * (first - 1)
  for i = gone + 1, 2 * m, 2 do log[i - gone], log[i - gone + 1] = log[i] + shift, log[i + 1] end
  for i = 2 * m, 2 * m - gone + 1, -1 do log[i] = nil end
  return finish(allowed, limit, remaining, retry, reset, 0, nil, log)
end
-- Gives back `amount` of a charge made at (c_us, c_r) (a reservation settled for less), as src/core/sliding_log.cc's
-- sliding_log_refund: the entry logged at the charge's time loses it, dropped once emptied; what other requests
-- logged is never taken. An entry that has left the window is dropped by the decision that follows all the same.
-- True when it changed st (lua/reservations.lua).
local function refund(amount, c_us, c_r)
  read_state('', 'dd', true)
  if not st or amount == 0 then return false end
  local at = (c_us - (now_us + shift / 1000)) * 1000 + c_r -- relative to the base, as the log's times
  for i = #st - 1, 1, -2 do
    if st[i] < at then return false end -- the times never fall from oldest to newest: it is not there
    if st[i] == at then
      st[i + 1] = st[i + 1] - math.min(st[i + 1], amount)
      if st[i + 1] == 0 then
        table.remove(st, i + 1)
        table.remove(st, i)
      end
      return true
    end
  end
  return false
end
