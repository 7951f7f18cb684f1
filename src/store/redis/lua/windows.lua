-- Window helpers for fixed_window, sliding_window and sliding_log (appended before each of them).
--
-- A window's bounds are times as pairs (us, r): whole microseconds since the epoch and the nanoseconds beyond them,
-- 0 <= r < 1000, each exact in a double; so every window the in-process store takes (any number of nanoseconds up to
-- 100 years, calendar weeks, months and years in UTC) starts and ends here on the same nanosecond as there, whether
-- the time is Redis's or the caller's.
local window_us, window_r, limit
local calendar -- '0': aligned to the epoch; 'week', 'month', 'year': calendar windows (UTC)
local window -- nanoseconds: exact below 2^53 (104 days)
-- This call's window and limit: ARGV[5...7] and ARGV[9] (algorithm_scripts.cc's WindowParams).
local function window_args()
  window_us, window_r, limit = param(5), param(6), param(7)
  calendar = ARGS[9]
  window = window_us * 1000 + window_r
end
local function room(count) if count >= limit then return 0 end return limit - count end

local function norm(us, r) -- any whole r into [0, 1000)
  local carry = math.floor(r / 1000)
  return us + carry, r - carry * 1000
end
local function before(a_us, a_r, b_us, b_r) return a_us < b_us or (a_us == b_us and a_r < b_r) end
local function ns_from_now(us, r) return (us - now_us) * 1000 + (r - now_r) end
-- The same, for the reply: exact even above 2^53 ns (104 days), where a Lua number is not, as its digits.
local function reply_ns_from_now(us, r)
  local d_us, d_r = norm(us - now_us, r - now_r)
  local approx = d_us * 1000 + d_r
  if d_us < 0 or approx < 9007199254740992 then return approx end
  return string.format('%.0f', d_us) .. string.format('%03d', d_r)
end
local function mod(a, b) -- exact for whole a, b below 2^53 (Lua's % rounds a / b first)
  local m = math.fmod(a, b)
  if m < 0 then m = m + b end
  return m
end

-- Days since 1970-01-01 of a proleptic Gregorian date, and back (eras of 400 years are 146097 days).
local function days_from_civil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local doy = math.floor((153 * ((m + 9) % 12) + 2) / 5) + d - 1
  return era * 146097 + yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy - 719468
end
local function civil_from_days(z)
  z = z + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local m = mp + 3
  if m > 12 then m = m - 12 end
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return y, m
end

-- The window holding (us, r): start and end.
local DAY_US = 86400000000
local function window_bounds(us, r)
  if calendar ~= '0' then
    local day = math.floor(us / DAY_US)
    local first, next
    if calendar == 'week' then -- 1970-01-01 was a Thursday: weeks start 3 days before multiples of 7
      first = day - mod(day + 3, 7)
      next = first + 7
    else
      local y, m = civil_from_days(day)
      if calendar == 'month' then
        first = days_from_civil(y, m, 1)
        if m == 12 then next = days_from_civil(y + 1, 1, 1) else next = days_from_civil(y, m + 1, 1) end
      else
        first, next = days_from_civil(y, 1, 1), days_from_civil(y + 1, 1, 1)
      end
    end
    return first * DAY_US, 0, next * DAY_US, 0
  end
  local s_us, s_r
  if window < 8796093022208 then -- 2^43: the offset into the window, times 1000, stays exact
    local rem = mod(mod(us, window) * 1000 + r, window)
    s_us, s_r = norm(us, r - rem)
  else -- few windows since the epoch (under 2^21): find which one from its exact multiples
    local q = math.floor((us * 1000 + r) / window)
    s_us, s_r = norm(q * window_us, q * window_r)
    while before(us, r, s_us, s_r) do s_us, s_r = norm(s_us - window_us, s_r - window_r) end
    local e_us, e_r = norm(s_us + window_us, s_r + window_r)
    while not before(us, r, e_us, e_r) do
      s_us, s_r = e_us, e_r
      e_us, e_r = norm(s_us + window_us, s_r + window_r)
    end
  end
  local e_us, e_r = norm(s_us + window_us, s_r + window_r)
  return s_us, s_r, e_us, e_r
end
