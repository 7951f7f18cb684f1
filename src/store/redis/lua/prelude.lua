-- ratekeeper: the part every decision script starts with (src/store/redis/lua/*.lua are appended to it).
--
-- KEYS[1]: the key's state, one string of fixed-width little-endian numbers (struct.pack): a tag byte, TAG, naming
-- the algorithm and the version of its layout (src/store/redis/algorithm_algorithm_scripts.cc); with a base, base_us, the microsecond
-- of the key's last write ('i7'); then the algorithm's fields as its file declares them to read_state(). Small on
-- purpose: a state of up to 28 bytes is one 48-byte allocation in Redis (docs/redis.md, "What is stored").
-- ARGV[1], ARGV[2]: now as whole microseconds and the nanoseconds beyond them; ARGV[1] == "" takes Redis's TIME.
-- ARGV[3]: cost; ARGV[4]: "1" to decide without recording; ARGV[5...]: the algorithm's parameters.
--
-- Precision: Lua numbers are doubles, exact for integers below 2^53. Times are kept relative to base_us, the
-- microsecond of the key's last write, in nanoseconds: exact to the nanosecond while they lie within 104 days of
-- it, which holds for every state that can still change a decision unless its window or half-life is longer.
-- Reply: {allowed, doubles, retry_after_ns, reset_after_ns, delay_ns}, doubles = struct.pack('<ddd', limit,
-- remaining, estimate or NaN); -1: never.
--
-- Packed (--redis-packed-hashes, docs/redis.md "Packed states"), when KEYS[2] is given: KEYS[1] is a hash holding
-- many keys' states, KEYS[2] this key's own key, named KEYS[1] .. field. The state is the hash's field, after the
-- second by which it expires ('i5'); or, when the hash is full (PACK_FIELDS, from algorithm_scripts.cc) or the state longer
-- than PACK_VALUE bytes, the own key, as unpacked. A state is read from the field, else from the own key, and
-- written back where it was read (a new one to the field if it fits).
-- Every name below is the library's, made once when Redis loads it (FUNCTION LOAD): each call sets its own values in
-- begin() and the algorithm's decide(), so nothing of one call's is read by the next. Run as an EVAL script instead
-- (algorithm_scripts.cc), the whole text runs at each call and every function here is made again.
local ARGS -- this call's ARGV
local key, own, field, in_hash
local now_us, now_r, cost, peek
local by_redis_clock
local st, now, shift, raw
local HEAD, EACH, NHEAD, NEACH, TIMED -- the layout, from read_state
-- Set by an algorithm whose state, rewritten, expires when it did (fixed_window): its TTL is then kept, which
-- costs Redis less than a new one. Only by Redis's clock: by callers' clocks each write's TTL is its caller's view.
local KEEP_TTL
local NEVER = -1
local MAX_NS = 9.2e18
local GROUPS = 256 -- a sliding log's entries are unpacked and packed this many at a time: Lua takes 8,000 values
local function param(i)
  local v = tonumber(ARGS[i])
  if not v then error('ratekeeper: parameter ' .. i .. ' is not a number: ' .. tostring(ARGS[i])) end
  return v
end
-- Reads the key's state: `fields` (a struct format), then any number of `each` groups (nil: none); with `timed`, a
-- base_us before them, and times in nanoseconds relative to it. Sets st (the fields, in order; nil: a fresh key),
-- now (nanoseconds since the base) and shift (adds to a time relative to the base to make it relative to now_us).
-- A state of an older layout is read as fresh, once; anything else is refused and left as it is.
-- One struct.unpack for the whole state (up to GROUPS entries), one struct.pack to write it.
local function read_state(fields, each, timed)
  TIMED, EACH = timed, each
  HEAD = timed and '<Bi7' .. fields or '<B' .. fields
  if each then
    NHEAD, NEACH = select(2, string.gsub(fields, '%a', '')), select(2, string.gsub(each, '%a', ''))
  end
  local base = now_us
  if raw then
    local rest, n = #raw - struct.size(HEAD), 0
    if each and rest > 0 then n = rest / struct.size('<' .. each) end
    if string.byte(raw) == TAG and (rest == 0 or (n > 0 and n == math.floor(n))) then
      local k = math.min(n, GROUPS)
      st = {struct.unpack(HEAD .. string.rep(each or '', k), raw)} -- the tag, base_us, the fields, the position
      local pos = table.remove(st)
      table.remove(st, 1)
      if timed then base = table.remove(st, 1) end
      n = n - k
      while n > 0 do
        k = math.min(n, GROUPS)
        local v = {struct.unpack('<' .. string.rep(each, k), raw, pos)}
        pos = table.remove(v)
        for i = 1, #v do st[#st + 1] = v[i] end
        n = n - k
      end
    else
      -- Whether raw holds this algorithm's state in a layout before this one: MessagePack {'name' or 'name.N', ...}.
      local ok, t = pcall(cmsgpack.unpack, raw)
      if not (ok and type(t) == 'table' and type(t[1]) == 'string' and
              (t[1] == ALGORITHM or string.sub(t[1], 1, #ALGORITHM + 1) == ALGORITHM .. '.')) then
        error(redis.error_reply('ERR ratekeeper: key ' .. (own or key) .. ' holds something other than ' .. ALGORITHM ..
                              ' state; it was left as it is'))
      end
    end
  end
  now = (now_us - base) * 1000 + now_r
  shift = (base - now_us) * 1000
  return st
end
-- Saves the new state for reset_after nanoseconds, or drops it if empty, and gives the reply. `state`: its fields
-- in read_state's order, times already relative to now_us; or the state already packed, a string; or true: the
-- algorithm has written it itself; nil: none (a key that had one is deleted).
-- The stored string of `state` (its fields in read_state's order, times relative to base_us; read_state's layout).
local function pack_state(state, base_us)
  if not EACH then
    if TIMED then return struct.pack(HEAD, TAG, base_us, unpack(state)) end
    return struct.pack(HEAD, TAG, unpack(state))
  end
  local n = (#state - NHEAD) / NEACH
  local k = math.min(n, GROUPS)
  local last = NHEAD + k * NEACH
  local parts = {}
  if TIMED then parts[1] = struct.pack(HEAD .. string.rep(EACH, k), TAG, base_us, unpack(state, 1, last))
  else parts[1] = struct.pack(HEAD .. string.rep(EACH, k), TAG, unpack(state, 1, last)) end
  while last < #state do
    k = math.min((#state - last) / NEACH, GROUPS)
    parts[#parts + 1] = struct.pack('<' .. string.rep(EACH, k), unpack(state, last + 1, last + k * NEACH))
    last = last + k * NEACH
  end
  return table.concat(parts)
end
local function finish(allowed, limit, remaining, retry, reset, delay, estimate, state)
  if not peek and state ~= true then
    if state and reset > 0 then
      local v = state
      if type(v) ~= 'string' then v = pack_state(state, now_us) end -- a string: packed by the algorithm
      -- Written to live px ms (docs/redis.md, "Packed states": the hash lives as long as its longest field), where
      -- it was read from; a new one in the hash if it fits.
      local px = math.max(1, math.ceil(math.min(reset, MAX_NS) / 1e6))
      local unpacked = not own
      if own and #v <= PACK_VALUE and (in_hash or not raw) then
        local n = -1 -- fields before this one's; -1: this key has one
        if not in_hash then
          n = redis.call('HLEN', key)
          if n >= PACK_FIELDS then
            -- The hash is full: forget its fields whose state expired (is a fresh key's) by now, unless a scan that
            -- found none is still good (the field '' holds the second the earliest live field expires): so a flood
            -- of new keys into a full hash costs each an HGET, not a scan of PACK_FIELDS fields.
            local now_s = math.floor(now_us / 1000000)
            local next_s = tonumber(redis.call('HGET', key, '') or '')
            n = PACK_FIELDS -- no room, unless the scan finds some
            if not next_s or now_s >= next_s then
              local all = redis.call('HGETALL', key)
              local dead, live = {}, 0
              next_s = nil
              for i = 1, #all, 2 do
                if all[i] ~= '' then
                  local e = struct.unpack('<i5', all[i + 1])
                  if e <= now_s then
                    dead[#dead + 1] = all[i]
                  else
                    live = live + 1
                    if not next_s or e < next_s then next_s = e end
                  end
                end
              end
              if #dead > 0 then
                redis.call('HDEL', key, unpack(dead))
                n = live
              else
                redis.call('HSET', key, '', next_s or 0)
              end
            end
          end
        end
        if n < PACK_FIELDS then
          -- The second it expires, rounded up, + 1: a field is only ever forgotten after its state is a fresh key's.
          redis.call('HSET', key, field,
                     struct.pack('<i5', math.floor(now_us / 1000000) + math.ceil(px / 1000) + 1) .. v)
          -- The hash gets one millisecond more than px. Redis 7.0's PEXPIRE reads its clock twice, for the base and
          -- then to delete at once a key whose expiry that base + px has already reached: a tick of the millisecond
          -- in between deleted a hash given 1 ms, with the state just written (SET PX makes no such check). With
          -- px + 1, only px ms passing inside the command can do that, and the hash outlives the state's px ms.
          if n == 0 then redis.call('PEXPIRE', key, px + 1) elseif not (KEEP_TTL and by_redis_clock) then
            redis.call('PEXPIRE', key, px + 1, 'GT')
          end
        else
          if in_hash then redis.call('HDEL', key, field) end
          redis.call('SET', own, v, 'PX', px)
        end
      elseif unpacked and KEEP_TTL and by_redis_clock then
        redis.call('SET', key, v, 'KEEPTTL')
      else
        if in_hash then redis.call('HDEL', key, field) end
        redis.call('SET', own or key, v, 'PX', px)
      end
    elseif raw then
      if not own then redis.call('DEL', key)
      elseif in_hash then redis.call('HDEL', key, field)
      else redis.call('DEL', own) end
    end
  end
  -- Whole nanoseconds go back as integers; what may have a fraction as the bits of three little-endian doubles,
  -- which keeps every bit and costs Redis far less than formatting them as text. No estimate: NaN.
  return {allowed and 1 or 0, struct.pack('<ddd', limit, remaining, estimate or (0 / 0)), retry, reset, delay}
end
-- Starts a call: its arguments, and the key's stored value (raw). Gives an error reply when the arguments are bad.
local function begin(keys, args)
  ARGS, key, own, field, in_hash = args, keys[1], keys[2], nil, nil
  if own then field = string.sub(own, #key + 1) end
  if args[1] == '' then
    local t = redis.call('TIME')
    now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
    now_r = 0
  else
    now_us = tonumber(args[1])
    now_r = tonumber(args[2])
  end
  cost = tonumber(args[3])
  peek = args[4] == '1'
  if not now_us or not now_r or not cost or cost < 0 or now_r < 0 or now_r >= 1000 then
    return redis.error_reply('ERR ratekeeper: bad arguments: now_us=' .. tostring(args[1]) .. ' now_r=' ..
                             tostring(args[2]) .. ' cost=' .. tostring(args[3]))
  end
  by_redis_clock, KEEP_TTL = args[1] == '', false
  st, now, shift = nil, 0, 0
  HEAD, EACH, NHEAD, NEACH, TIMED = nil, nil, nil, nil, nil
  if own then
    raw = redis.call('HGET', key, field)
    if raw then
      raw, in_hash = string.sub(raw, 6), true
    else
      raw = redis.call('GET', own)
    end
  else
    raw = redis.call('GET', key)
  end
end
