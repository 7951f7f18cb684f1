-- fixed_window: as src/core/windows.cc. State {start_us, start_r, count}: the start of the latest window seen.
-- Where it fits (a window that starts on a whole second, 1 to 9,999,999 counted), the state is written as 18
-- decimal digits instead: the tag, the count in 7 digits, the start in seconds in 10. Redis keeps such a value as an
-- integer inside its object, 16 bytes a key less than a string; a binary state is never all digits (its count is a
-- double whose top byte is not one). Read and written here in its own lines, not through read_state's tables: this
-- is the script most calls run.
local LAYOUT = 'i7Hd'
local function decide(keys, args)
  local bad = begin(keys, args)
  if bad then return bad end
  window_args()
  local st_us, st_r, count
  -- The digits are told from a binary state by the last byte alone: the top byte of a whole count >= 0 as a double.
  local last = raw and #raw == 18 and string.byte(raw) == TAG and string.byte(raw, 18)
  local digits = last and last >= 48 and last <= 57
  if digits then
    st_us, count = tonumber(string.sub(raw, 9)), tonumber(string.sub(raw, 2, 8))
    digits = st_us and count
  end
  if digits then
    st_us, st_r = st_us * 1000000, 0
  elseif raw and read_state(LAYOUT) then
    st_us, st_r, count = st[1], st[2], st[3]
  end
  local count_refused = args[8] == '1'
  local s_us, s_r, e_us, e_r = window_bounds(now_us, now_r)
  local seen = count -- the count as stored, when it is this window's
  if st_us and not before(st_us, st_r, s_us, s_r) then -- this window, or a later one the clock went back from
    s_us, s_r, e_us, e_r = window_bounds(st_us, st_r)
    KEEP_TTL = count > 0 -- written before for this window, to expire at its end: it still does
  else
    count, seen = 0, nil
  end
  local allowed = count + cost <= limit -- past the limit (count_refused), cost 0 is refused too
  if allowed or count_refused then count = count + cost end
  local to_end = ns_from_now(e_us, e_r)
  local retry = 0
  if not allowed then if cost <= limit then retry = to_end else retry = NEVER end end
  local reset = 0
  if count > 0 then reset = math.max(0, to_end) end
  local state = nil
  if count > 0 then
    if s_r ~= 0 or s_us % 1000000 ~= 0 or s_us < 0 or s_us >= 1e16 or count > 9999999 or count % 1 ~= 0 then
      state = struct.pack('<B' .. LAYOUT, TAG, s_us, s_r, count)
    elseif digits and seen and KEEP_TTL and by_redis_clock and not own and reset > 0 then
      -- The same window's digits, its TTL kept (what SET ... KEEPTTL would write): unchanged (cost 0, or refused and
      -- not counted), or a larger count, which INCRBY adds in place, the count's digits being the 8th to 2nd.
      if count > seen and not peek then redis.call('INCRBY', key, (count - seen) .. '0000000000') end
      state = true
    else
      state = string.format('%c%07d%010d', TAG, count, s_us / 1000000)
    end
  end
  local reply = finish(allowed, limit, room(count), retry, reset, 0, nil, state)
  if retry == to_end then reply[3] = reply_ns_from_now(e_us, e_r) end
  if reset == to_end then reply[4] = reply_ns_from_now(e_us, e_r) end
  return reply
end
-- Gives back `amount` of a charge made at (c_us, c_r) (a reservation settled for less), as src/core/windows.cc's
-- fixed_window_refund: the count goes down, not below 0, while the window is still the one the charge went into.
-- Writes raw itself, in the binary layout (decide writes it back as digits where they fit); false: st unused.
local function refund(amount, c_us, c_r)
  window_args()
  local st_us, st_r, count
  local last = #raw == 18 and string.byte(raw) == TAG and string.byte(raw, 18)
  if last and last >= 48 and last <= 57 then
    st_us, count = tonumber(string.sub(raw, 9)), tonumber(string.sub(raw, 2, 8))
    if st_us then st_us, st_r = st_us * 1000000, 0 end
  elseif read_state(LAYOUT) then
    st_us, st_r, count = st[1], st[2], st[3]
  end
  if not (st_us and count) then return false end
  local s_us, s_r = window_bounds(now_us, now_r)
  if before(st_us, st_r, s_us, s_r) then return false end -- the window has turned: nothing to give back
  local a_us, a_r = window_bounds(c_us, c_r)
  if a_us ~= st_us or a_r ~= st_r then return false end
  raw = struct.pack('<B' .. LAYOUT, TAG, st_us, st_r, count - math.min(count, amount))
  return false
end
