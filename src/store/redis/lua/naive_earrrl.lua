-- The naive EARRRL of the practical post (docs/algorithms.md [1]), for the benchmark only: two keys (N and T), the client's time, GET and SET of each.
-- bench: 2 rk:nN:__rand_int__ rk:nT:__rand_int__ 1000000000 10
-- KEYS[1] = N, KEYS[2] = T; ARGV[1] = the limit per second, ARGV[2] = the half-life in seconds.
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local lambda = math.log(2) / tonumber(ARGV[2])
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
local decayed = n * math.exp(-lambda * (now - last))
local allowed = decayed * lambda <= tonumber(ARGV[1])
redis.call('SET', KEYS[1], tostring(decayed + 1))
redis.call('SET', KEYS[2], tostring(now))
if allowed then return 1 end
return 0
