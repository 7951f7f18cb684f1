-- Window helpers for fixed_window, sliding_window and sliding_log (appended before each of them).
local window = param(5)
local limit = param(6)
if window % 1000 ~= 0 then
  return redis.error_reply('ERR ratekeeper: a window of ' .. fmt(window) .. ' ns is not a whole number of microseconds')
end
-- The start of the epoch-aligned window holding now, relative to base: exact, from the microseconds.
local window_start = now - ((now_us % (window / 1000)) * 1000 + now_r)
local function room(count) if count >= limit then return 0 end return limit - count end
