-- lib/gcra_step.lua: GCRA's state and step, shared by lua/gcra.lua and lua/limit_list.lua so that
-- a counter means the same to both (needs lib/int.lua and lib/bucket_step.lua first).
-- Provides
--   gcra_step(call, i, key, pending, charge) -> the six integers of a step (lib/run_call.lua)
--     for counter i stored at `key`: reads the string "<t>;<d>;<x>" (a missing or unreadable
--     value, or one past x, is an empty debt), decides with bucket_step and, when it writes,
--     stores the string and its expiry; see lua/gcra.lua for the layout.

local function gcra_step(call, i, key, pending, charge)
  local now = call.now
  local debt, at, expire_at = 0, now, nil
  local stored = redis.call('GET', key)
  if stored then
    local t, d, x = string.match(stored, '^(%d+);(%d+);(%d+)$')
    if t ~= nil and tonumber(x) > now then debt, at, expire_at = tonumber(d), tonumber(t), tonumber(x) end
  end
  return bucket_step(call, i, debt, at, expire_at, pending, charge, function(d, t, x)
    redis.call('SET', key, int(t) .. ';' .. int(d) .. ';' .. int(x))
    redis.call('PEXPIREAT', key, int(x))
  end)
end
