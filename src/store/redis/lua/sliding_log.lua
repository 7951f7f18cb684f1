-- sliding_log: as src/core/sliding_log.cc. State {t1, c1, t2, c2, ...}, oldest first (times relative to the base):
-- c_i requests counted at t_i.
read_state('', 'dd', true)
local ts, cs, sum = {}, {}, 0
if st then
  for i = 1, #st, 2 do
    ts[#ts + 1], cs[#cs + 1] = st[i], st[i + 1]
    sum = sum + st[i + 1]
  end
end
local first = 1 -- entries before it have left the window
while first <= #ts and ts[first] + window <= now do
  sum = sum - cs[first]
  first = first + 1
end
local used = sum
local allowed = used <= limit and cost <= limit - used
local retry = 0
if allowed then
  if cost > 0 then
    local n = #ts
    local t = now
    if n >= first then t = math.max(now, ts[n]) end
    if n >= first and ts[n] == t then cs[n] = cs[n] + cost else ts[n + 1], cs[n + 1] = t, cost end
    sum = sum + cost
  end
elseif cost > limit then
  retry = NEVER
else
  local freed = 0
  for i = first, #ts do
    freed = freed + cs[i]
    if used - freed <= limit - cost then
      retry = math.max(0, ts[i] + window - now)
      break
    end
  end
end
local remaining = 0
if sum < limit then remaining = limit - sum end
local reset = 0
if #ts >= first then reset = math.max(0, ts[#ts] + window - now) end
local state = {}
for i = first, #ts do
  state[#state + 1] = ts[i] + shift
  state[#state + 1] = cs[i]
end
return finish(allowed, limit, remaining, retry, reset, 0, nil, state)
