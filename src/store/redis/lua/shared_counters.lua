-- The shared counters of `sharing: batched` (src/store/redis/shared_counters.h): no algorithm here, only numbers.
-- KEYS[1]: a hash, server id -> that server's cumulative hits on the key; KEYS[2]: a snapshot of the key's state
-- (opaque bytes) with the counts it includes.
-- ARGV: this server's id, hits to add, time to live (ms), '1' to answer the snapshot, a snapshot to write (optional).
-- Answers {the hash as HGETALL gives it, the snapshot or ''}.
local counts, snap = KEYS[1], KEYS[2]
if ARGV[2] ~= '0' then redis.call('HINCRBY', counts, ARGV[1], ARGV[2]) end
if ARGV[5] then
  redis.call('SET', snap, ARGV[5], 'PX', ARGV[3])
else
  redis.call('PEXPIRE', snap, ARGV[3])
end
redis.call('PEXPIRE', counts, ARGV[3])
local out = {redis.call('HGETALL', counts), ''}
if ARGV[4] == '1' then out[2] = redis.call('GET', snap) or '' end
return out
