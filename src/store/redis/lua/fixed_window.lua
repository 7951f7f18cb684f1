-- fixed_window: as src/core/windows.cc. State {start_us, start_r, count}: the start of the latest window seen.
-- Where it fits (a window that starts on a whole second, 1 to 9,999,999 counted), the state is written as 18
-- decimal digits instead: the tag, the count in 7 digits, the start in seconds in 10. Redis keeps such a value as an
-- integer inside its object, 16 bytes a key less than a string; a binary state is never all digits (its count is a
-- double whose top byte is not one).
read_state('i7Hd', nil, false, {
  read = function(s)
    if #s ~= 18 or string.find(s, '%D') or string.byte(s) ~= TAG then return nil end
    return {tonumber(string.sub(s, 9)) * 1000000, 0, tonumber(string.sub(s, 2, 8))}
  end,
  write = function(f)
    local s_us, s_r, n = f[1], f[2], f[3]
    if s_r ~= 0 or s_us % 1000000 ~= 0 or s_us < 0 or s_us >= 1e16 or n < 1 or n > 9999999 or n % 1 ~= 0 then
      return nil
    end
    return string.format('%c%07d%010d', TAG, n, s_us / 1000000)
  end})
local count_refused = ARGV[8] == '1'
local s_us, s_r, e_us, e_r = window_bounds(now_us, now_r)
local count = 0
if st and not before(st[1], st[2], s_us, s_r) then -- this window, or a later one the clock went back from
  s_us, s_r, e_us, e_r = window_bounds(st[1], st[2])
  count = st[3]
  KEEP_TTL = count > 0 -- written before for this window, to expire at its end: it still does
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
