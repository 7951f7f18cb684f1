-- The `concurrency` algorithm's leases on one key (core/concurrency.h): a sorted set of lease ids, each scored by
-- the microsecond its lease expires, so that every server of a fleet sees the same leases.
--
-- KEYS[1]: the key's sorted set. ARGV[1]: "acquire" or "release"; ARGV[2]: the lease id (32 hex digits, random);
-- ARGV[3]: now in microseconds, or "" for Redis's TIME; ARGV[4], ARGV[5] (acquire): max_in_flight and lease_ttl in
-- microseconds.
-- Reply to acquire: {1, in_flight, 0} or {0, in_flight, microseconds until the first lease expires}; to release:
-- {1} if the lease was held, {0} (nothing changed) if unknown, expired or released.
-- Scores are whole microseconds, exact in a double until the year 2255.
local key = KEYS[1]
local now
if ARGV[3] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[3])
end
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
if ARGV[1] == 'release' then
  local gone = redis.call('ZREM', key, ARGV[2])
  if gone == 1 and redis.call('ZCARD', key) == 0 then redis.call('DEL', key) end
  return {gone}
end
local max, ttl = tonumber(ARGV[4]), tonumber(ARGV[5])
local n = redis.call('ZCARD', key)
if n >= max then
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return {0, n, math.max(tonumber(first[2]) - now, 0)}
end
redis.call('ZADD', key, now + ttl, ARGV[2])
-- The set lives as long as its last lease: a whole millisecond past the latest expiry.
local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', key, math.floor((tonumber(last[2]) - now) / 1000) + 1)
return {1, n + 1, 0}
