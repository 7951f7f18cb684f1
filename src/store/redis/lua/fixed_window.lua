-- fixed_window: as src/core/windows.cc (windows aligned to the epoch). State {start, count}.
local count_refused = ARGV[7] == '1'
if ARGV[8] == '1' then
  return redis.error_reply('ERR ratekeeper: calendar-aligned windows (weeks, months, years) are not available in Redis')
end
local start, count = nil, 0
if st then start, count = st[3], st[4] end
if start == nil or window_start > start then start, count = window_start, 0 end
local finish_at = start + window
local allowed = cost <= room(count)
if allowed or count_refused then count = count + cost end
local retry = 0
if not allowed then if cost <= limit then retry = finish_at - now else retry = NEVER end end
local reset = 0
if count > 0 then reset = math.max(0, finish_at - now) end
return finish(allowed, limit, room(count), retry, reset, 0, nil, {start + shift, count})
