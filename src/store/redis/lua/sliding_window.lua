-- sliding_window: as src/core/windows.cc. State {start_us, start_r, curr, prev}: the current window's start.
-- Times below are nanoseconds relative to now. Exact while limit * window_ns < 2^53.
-- The smallest offset into a window at whose start `weight` requests were counted, where the weighted count
-- floors to at most target - 1.
local function first_offset_below(weight, target)
  if weight == 0 then return 0 end
  local most_left = math.floor((target * window + weight - 1) / weight) - 1
  if most_left >= window then return 0 end
  return window - most_left
end
local function decide(keys, args)
  local bad = begin(keys, args)
  if bad then return bad end
  window_args()
  read_state('i7Hdd')
  local s_us, s_r = window_bounds(now_us, now_r)
  local curr, prev = 0, 0
  if st then
    if not before(st[1], st[2], s_us, s_r) then -- this window, or a later one the clock went back from
      s_us, s_r, curr, prev = st[1], st[2], st[3], st[4]
    else
      local a_us, a_r = norm(st[1] + window_us, st[2] + window_r)
      if a_us == s_us and a_r == s_r then prev = st[3] end -- the window just before: its count weighs in
    end
  end
  local start = ns_from_now(s_us, s_r)
  local elapsed = math.min(math.max(-start, 0), window)
  local weighted = math.floor(prev * (window - elapsed) / window)
  local count = curr + weighted
  local allowed = count <= limit and cost <= limit - count -- past the limit even cost 0 is refused
  local remaining, retry = 0, 0
  if allowed then
    curr = curr + cost
    remaining = room(count + cost)
  else
    local before = curr
    if args[8] == '1' then curr = math.max(curr, math.min(curr + cost, 2 * limit)) end -- owed (windows.cc)
    remaining = room(count + curr - before)
    if cost > limit then
      retry = NEVER
    elseif curr <= limit - cost then
      retry = math.max(0, start + first_offset_below(prev, limit - cost - curr + 1))
    else
      retry = start + window + first_offset_below(curr, limit - cost + 1)
    end
  end
  local fresh_at = 0
  if curr > 0 then
    fresh_at = start + window + first_offset_below(curr, 1)
  elseif prev > 0 then
    fresh_at = start + first_offset_below(prev, 1)
  end
  return finish(allowed, limit, remaining, retry, math.max(0, fresh_at), 0, nil, {s_us, s_r, curr, prev})
end
-- Gives back `amount` of a charge made at (c_us, c_r) (a reservation settled for less), as src/core/windows.cc's
-- sliding_window_refund: from the count of the window it went into, the current one or (once the window has
-- turned) the previous one, not below 0. True when it changed st (lua/reservations.lua).
local function refund(amount, c_us, c_r)
  window_args()
  read_state('i7Hdd')
  if not st then return false end
  local s_us, s_r = window_bounds(now_us, now_r)
  local curr, prev = 0, 0
  if not before(st[1], st[2], s_us, s_r) then
    s_us, s_r, curr, prev = st[1], st[2], st[3], st[4]
  else
    local a_us, a_r = norm(st[1] + window_us, st[2] + window_r)
    if a_us == s_us and a_r == s_r then prev = st[3] end
  end
  local q_us, q_r = window_bounds(c_us, c_r)
  local n_us, n_r = norm(q_us + window_us, q_r + window_r)
  if q_us == s_us and q_r == s_r then
    curr = curr - math.min(curr, amount)
  elseif n_us == s_us and n_r == s_r then
    prev = prev - math.min(prev, amount)
  else
    return false
  end
  st[1], st[2], st[3], st[4] = s_us, s_r, curr, prev
  return true
end
