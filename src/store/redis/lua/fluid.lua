-- token_bucket and leaky_bucket: as src/core/fluid.cc. State {level, t}.
local capacity, rate = param(5), param(6)
local tolerance = 1e-9
local level0, t0 = 0, 0
if st then level0, t0 = st[3], st[4] end
local level = 0
if level0 > 0 then
  local dt = now - t0
  if dt < 0 then dt = 0 end
  level = level0 - dt * rate
  if level < tolerance then level = 0 end
end
local allowed = level + cost <= capacity + tolerance
local retry = 0
if allowed then
  level = math.min(capacity, level + cost)
elseif cost <= capacity then
  retry = ceil_ns((level + cost - capacity - tolerance) / rate)
else
  retry = NEVER
end
local new_t = now
if level0 > 0 then new_t = math.max(t0, now) end
local remaining = math.max(0, math.floor(capacity - level + tolerance))
return finish(allowed, capacity, remaining, retry, ceil_ns(level / rate), 0, nil, {level, new_t + shift})
