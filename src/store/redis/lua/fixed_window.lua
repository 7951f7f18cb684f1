-- fixed_window: as src/core/windows.cc. State {start_us, start_r, count}: the start of the latest window seen.
read_state('i7Hd')
local count_refused = ARGV[8] == '1'
local s_us, s_r, e_us, e_r = window_bounds(now_us, now_r)
local count = 0
if st and not before(st[1], st[2], s_us, s_r) then -- this window, or a later one the clock went back from
  s_us, s_r, e_us, e_r = window_bounds(st[1], st[2])
  count = st[3]
end
local allowed = count + cost <= limit -- past the limit (count_refused), cost 0 is refused too
if allowed or count_refused then count = count + cost end
local to_end = ns_from_now(e_us, e_r)
local retry = 0
if not allowed then if cost <= limit then retry = to_end else retry = NEVER end end
local reset = 0
if count > 0 then reset = math.max(0, to_end) end
local reply = finish(allowed, limit, room(count), retry, reset, 0, nil, {s_us, s_r, count})
if retry == to_end then reply[3] = reply_ns_from_now(e_us, e_r) end
if reset == to_end then reply[4] = reply_ns_from_now(e_us, e_r) end
return reply
