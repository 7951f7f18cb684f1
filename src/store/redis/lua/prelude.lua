-- ratekeeper: the part every decision script starts with (src/store/redis/lua/*.lua are appended to it).
--
-- KEYS[1]: the key's state, one string packed with cmsgpack: {tag, base_us, fields...}; the tag is the algorithm's
-- name, with '.N' for the Nth layout of its fields (src/store/redis/scripts.cc).
-- ARGV[1], ARGV[2]: now as whole microseconds and the nanoseconds beyond them; ARGV[1] == "" takes Redis's TIME.
-- ARGV[3]: cost; ARGV[4]: "1" to decide without recording; ARGV[5...]: the algorithm's parameters.
--
-- Precision: Lua numbers are doubles, exact for integers below 2^53. Times are kept relative to base_us, the
-- microsecond of the key's last write, in nanoseconds: exact to the nanosecond while they lie within 104 days of
-- it, which holds for every state that can still change a decision unless its window or half-life is longer.
-- Reply: {allowed, doubles, retry_after_ns, reset_after_ns, delay_ns}, doubles = struct.pack('<ddd', limit,
-- remaining, estimate or NaN); -1: never.
local key = KEYS[1]
local now_us, now_r
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  now_r = 0
else
  now_us = tonumber(ARGV[1])
  now_r = tonumber(ARGV[2])
end
local cost = tonumber(ARGV[3])
local peek = ARGV[4] == '1'
if not now_us or not now_r or not cost or cost < 0 or now_r < 0 or now_r >= 1000 then
  return redis.error_reply('ERR ratekeeper: bad arguments: now_us=' .. tostring(ARGV[1]) .. ' now_r=' ..
                           tostring(ARGV[2]) .. ' cost=' .. tostring(ARGV[3]))
end
local function param(i)
  local v = tonumber(ARGV[i])
  if not v then error('ratekeeper: parameter ' .. i .. ' is not a number: ' .. tostring(ARGV[i])) end
  return v
end
local NEVER = -1
local MAX_NS = 9.2e18
local function ceil_ns(x)
  if not (x > 0) then return 0 end
  if x >= MAX_NS then return MAX_NS end
  return math.ceil(x)
end
local st = nil
local raw = redis.call('GET', key)
if raw then
  local ok, t = pcall(cmsgpack.unpack, raw)
  local older = ok and type(t) == 'table' and TAG ~= ALGORITHM and t[1] == ALGORITHM -- an older layout: fresh
  if not older and (not ok or type(t) ~= 'table' or t[1] ~= TAG or type(t[2]) ~= 'number') then
    return redis.error_reply('ERR ratekeeper: key ' .. key .. ' holds something other than ' .. ALGORITHM ..
                             ' state; it was left as it is')
  end
  if not older then st = t end
end
local base = st and st[2] or now_us
local now = (now_us - base) * 1000 + now_r -- nanoseconds since base
local shift = (base - now_us) * 1000      -- adds to a time relative to base to make it relative to now_us
local function fmt(x) return string.format('%.17g', x) end
-- Saves the new state (times already relative to now_us) for reset_after nanoseconds, or drops it if empty.
local function finish(allowed, limit, remaining, retry, reset, delay, estimate, state)
  if not peek then
    if state and reset > 0 then
      table.insert(state, 1, now_us)
      table.insert(state, 1, TAG)
      redis.call('SET', key, cmsgpack.pack(state), 'PX', math.max(1, math.ceil(math.min(reset, MAX_NS) / 1e6)))
    elseif raw then
      redis.call('DEL', key)
    end
  end
  -- Whole nanoseconds go back as integers; what may have a fraction as the bits of three little-endian doubles,
  -- which keeps every bit and costs Redis far less than formatting them as text. No estimate: NaN.
  return {allowed and 1 or 0, struct.pack('<ddd', limit, remaining, estimate or (0 / 0)), retry, reset, delay}
end
