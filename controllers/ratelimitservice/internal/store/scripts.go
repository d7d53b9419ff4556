package store

import "github.com/redis/go-redis/v9"

// Both scripts return {over (0/1), remaining, milliseconds until reset,
// overflow (0/1)}. Every key they create gets a TTL in the same script.

// fixedWindowScript counts hits in the current window.
//
// KEYS[1] client counter, KEYS[2] distinct keys counter, KEYS[3] overflow
// counter: each without its ":<window>" suffix, which only the script
// knows. ARGV: unit seconds, requests, hits, max keys, slack seconds.
var fixedWindowScript = redis.NewScript(`
local now = redis.call('TIME')
local sec = tonumber(now[1])
local msec = math.floor(tonumber(now[2]) / 1000)
local unit = tonumber(ARGV[1])
local requests = tonumber(ARGV[2])
local hits = tonumber(ARGV[3])
local maxkeys = tonumber(ARGV[4])
local ttl = unit + tonumber(ARGV[5])
local window = math.floor(sec / unit)
local suffix = ':' .. string.format('%d', window)
local key = KEYS[1] .. suffix
local overflow = 0
if redis.call('EXISTS', key) == 0 then
  local keys = KEYS[2] .. suffix
  if tonumber(redis.call('GET', keys) or '0') >= maxkeys then
    key = KEYS[3] .. suffix
    overflow = 1
  elseif redis.call('INCR', keys) == 1 then
    redis.call('EXPIRE', keys, ttl)
  end
end
local count = redis.call('INCRBY', key, hits)
if count == hits then
  redis.call('EXPIRE', key, ttl)
end
local over = 0
if count > requests then
  over = 1
end
local remaining = requests - count
if remaining < 0 then
  remaining = 0
end
return {over, remaining, ((window + 1) * unit - sec) * 1000 - msec, overflow}
`)

// tokenBucketScript is GCRA: the key holds the theoretical arrival time
// (microseconds) at which the bucket would be full again; a hit moves it
// by the time one token takes to refill, and is refused when that would
// put it further ahead of now than a full bucket's worth.
//
// KEYS[1] client bucket, KEYS[2] distinct keys counter (without its
// ":<window>" suffix), KEYS[3] overflow bucket. ARGV: unit seconds,
// requests, capacity, hits, max keys, slack seconds.
var tokenBucketScript = redis.NewScript(`
local now = redis.call('TIME')
local sec = tonumber(now[1])
local nowus = sec * 1000000 + tonumber(now[2])
local per = tonumber(ARGV[1]) * 1000000 / tonumber(ARGV[2])
local full = tonumber(ARGV[3]) * per
local hits = tonumber(ARGV[4])
local maxkeys = tonumber(ARGV[5])
local slack = tonumber(ARGV[6])
local key = KEYS[1]
local overflow = 0
local stored = redis.call('GET', key)
if not stored then
  local window = math.max(1, math.ceil(full / 1000000))
  local keys = KEYS[2] .. ':' .. string.format('%d', math.floor(sec / window))
  if tonumber(redis.call('GET', keys) or '0') >= maxkeys then
    key = KEYS[3]
    overflow = 1
    stored = redis.call('GET', key)
  elseif redis.call('INCR', keys) == 1 then
    redis.call('EXPIRE', keys, window + slack)
  end
end
local tat = nowus
if stored then
  tat = math.max(tonumber(stored), nowus)
end
local next = tat + hits * per
local over = 0
if next - nowus > full then
  over = 1
  next = tat
else
  redis.call('SET', key, string.format('%.17g', next), 'PX', math.ceil((next - nowus) / 1000) + slack * 1000)
end
local remaining = math.floor((full - (next - nowus)) / per + 1e-9)
return {over, remaining, math.ceil((next - nowus) / 1000), overflow}
`)
