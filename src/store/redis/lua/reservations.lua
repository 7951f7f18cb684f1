-- Reserve and settle (docs/redis.md, "Reserve and settle"): appended after an algorithm's file, whose decide and
-- refund it calls; its own function, so that a decision's call does nothing more than before.
--
-- KEYS: the key's as a decision takes them (its state; or, packed, its hash and its own key), then the reservation's
-- record. ARGV[1], ARGV[2], ARGV[3]: as a decision's (now, and the estimate or the actual); ARGV[4]: 'r' (reserve)
-- or 's' (settle). Reserve: ARGV[5...] the parameters a reserve decides with (count_refused off), then the ttl in
-- nanoseconds, last. Settle: the spec's parameters, then as many again with count_refused on (an overdraw's).
-- The record, RECORD: its tag byte, the estimate, the reserve's time as whole microseconds and the nanoseconds beyond
-- them, its reset_after and its ttl in nanoseconds; it lives PX ttl (rounded up to a millisecond), and is expired
-- for a settle whose now is ttl or more after the reserve's, as in memory (whichever clock decides).
-- Reply to reserve: the decision's; to settle: {0} when not settled (nothing changed), else the decision's and the
-- estimate after it.
local RECORD_TAG, RECORD = 0x52, '<Bdi7Hdd' -- 'R', then 33 bytes
local function bad_args(why)
  return redis.error_reply('ERR ratekeeper: bad arguments: ' .. why)
end
local function foreign(rec)
  return redis.error_reply('ERR ratekeeper: key ' .. rec .. ' holds something other than a reservation; it was ' ..
                           'left as it is')
end
-- st as read_state left it, packed back into raw with its own base.
local function encode_state()
  return pack_state(st, now_us + shift / 1000)
end
local function reservation(keys, args)
  local mode, n = args[4], #keys
  if n ~= 2 and n ~= 3 then return bad_args(n .. ' keys') end
  local rec = keys[n]
  local state_keys = {keys[1]}
  if n == 3 then state_keys[2] = keys[2] end
  if mode == 'r' then
    local ttl = tonumber(args[#args])
    if not ttl or not (ttl > 0) then return bad_args('ttl=' .. tostring(args[#args])) end
    if redis.call('EXISTS', rec) == 1 then return foreign(rec) end -- ids are fresh: anything there is not ours
    args[#args], args[4] = nil, '0'
    local reply = decide(state_keys, args)
    if reply.err or reply[1] ~= 1 then return reply end
    redis.call('SET', rec, struct.pack(RECORD, RECORD_TAG, cost, now_us, now_r, tonumber(reply[4]), ttl), 'PX',
               math.max(1, math.ceil(ttl / 1e6)))
    return reply
  end
  if mode ~= 's' then return bad_args('mode=' .. tostring(mode)) end
  local p = (#args - 4) / 2 -- how many parameters each set has
  local actual = tonumber(args[3])
  if p < 1 or p ~= math.floor(p) then return bad_args(#args .. ' arguments') end
  if not actual or actual < 0 then return bad_args('actual=' .. tostring(args[3])) end
  local v = redis.call('GET', rec)
  if not v then return {0} end
  if #v ~= struct.size(RECORD) or string.byte(v) ~= RECORD_TAG then return foreign(rec) end
  local _, estimate, c_us, c_r, reset, ttl = struct.unpack(RECORD, v)
  -- One time for the record's expiry and the decision: Redis's, read here, or the caller's.
  local t_us, t_r
  if args[1] == '' then
    local t = redis.call('TIME')
    t_us, t_r = tonumber(t[1]) * 1000000 + tonumber(t[2]), 0
    args[1], args[2] = string.format('%.0f', t_us), '0'
  else
    t_us, t_r = tonumber(args[1]), tonumber(args[2])
    if not t_us or not t_r or t_r < 0 or t_r >= 1000 then return bad_args('now_us=' .. tostring(args[1]) .. ' now_r=' .. tostring(args[2])) end
  end
  if (t_us - c_us) * 1000 + (t_r - c_r) >= ttl then -- expired: it stays charged as reserved
    redis.call('DEL', rec)
    return {0}
  end
  args[4] = '0'
  if actual > estimate then -- an overdraw, with count_refused on: recorded even past what is left
    for i = 5, 4 + p do args[i] = args[i + p] end
    args[3] = string.format('%.0f', actual - estimate)
  else
    -- The refund, on the state decide reads, then a look at cost 0 that writes it: begin is this call's once, and
    -- puts itself back before anything else runs (a function library keeps its names from call to call).
    args[3] = '0'
    local plain = begin
    begin = function(k, a)
      begin = plain
      local bad = plain(k, a)
      if bad then return bad end
      if raw and refund(estimate - actual, c_us, c_r, (c_us - now_us) * 1000 + (c_r - now_r) + reset) then
        raw = encode_state()
      end
    end
  end
  for i = #args, 5 + p, -1 do args[i] = nil end
  local reply = decide(state_keys, args)
  if reply.err then return reply end
  redis.call('DEL', rec) -- after the decision: one that failed (a foreign state) leaves the record as it was
  reply[6] = estimate
  return reply
end
