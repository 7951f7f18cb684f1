-- sliding_window: as src/core/windows.cc. State {start, curr, prev}. Exact while limit * window_ns < 2^53.
local start, curr, prev = nil, 0, 0
if st then start, curr, prev = st[3], st[4], st[5] end
if start == nil or window_start > start then
  local adjacent = start ~= nil and window_start - start == window
  if adjacent then prev = curr else prev = 0 end
  curr = 0
  start = window_start
end
local elapsed = math.min(math.max(now - start, 0), window)
local weighted = math.floor(prev * (window - elapsed) / window)
-- The smallest offset into a window at whose start `weight` requests were counted, where the weighted count
-- floors to at most target - 1.
local function first_offset_below(weight, target)
  if weight == 0 then return 0 end
  local most_left = math.floor((target * window + weight - 1) / weight) - 1
  if most_left >= window then return 0 end
  return window - most_left
end
local count = curr + weighted
local allowed = cost <= room(count)
local remaining, retry = 0, 0
if allowed then
  curr = curr + cost
  remaining = room(count + cost)
else
  remaining = room(count)
  if cost > limit then
    retry = NEVER
  elseif curr <= limit - cost then
    retry = math.max(0, start + first_offset_below(prev, limit - cost - curr + 1) - now)
  else
    retry = start + window + first_offset_below(curr, limit - cost + 1) - now
  end
end
local fresh_at = now
if curr > 0 then
  fresh_at = start + window + first_offset_below(curr, 1)
elseif prev > 0 then
  fresh_at = start + first_offset_below(prev, 1)
end
local reset = math.max(0, fresh_at - now)
return finish(allowed, limit, remaining, retry, reset, 0, nil, {start + shift, curr, prev})
