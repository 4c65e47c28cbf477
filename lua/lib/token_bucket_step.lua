-- lib/token_bucket_step.lua: the token bucket's state and step, shared by lua/token_bucket.lua and
-- lua/limit_list.lua so that a bucket means the same to both (needs lib/int.lua and
-- lib/bucket_step.lua first).
-- Provides
--   token_bucket_step(call, i, key, pending, charge) -> the six integers of a step
--     (lib/run_call.lua) for counter i stored at `key`: reads the hash {d, t, x} (a missing key,
--     or one past x, is a full bucket), decides with bucket_step and, when it writes, stores
--     the hash and its expiry; see lua/token_bucket.lua for the layout.

local function token_bucket_step(call, i, key, pending, charge)
  local now = call.now
  local s = redis.call('HMGET', key, 'd', 't', 'x')
  local debt, at, x = tonumber(s[1]), tonumber(s[2]), tonumber(s[3])
  if debt == nil or at == nil or x == nil or x <= now then
    debt, at, x = 0, now, nil
  end
  return bucket_step(call, i, debt, at, x, pending, charge, function(d, t, expire_at)
    redis.call('HSET', key, 'd', int(d), 't', int(t), 'x', int(expire_at))
    redis.call('PEXPIREAT', key, int(expire_at))
  end)
end
