-- gcra: the generic cell rate algorithm, stored as one value per key. Emission interval
-- T = W / limit; allowed iff the debt after the hits stays within burst × T, i.e. the
-- theoretical arrival time max(TAT, now) + hits × T − now <= burst × T. Computed scaled by
-- limit (T × limit = W) in integers: the debt is exactly token_bucket's, and both answer alike
-- through lib/bucket_step.lua; only admitted hits move it.
-- Protocol: lib/read_call.lua (KEYS, ARGV), lib/run_call.lua (modes, Returns).
--
-- KEYS[i]     key i: the string "<t>;<debt>;<x>": the debt (tokens × W) as it stood at epoch
--             ms t (never moves back), and x, the epoch ms at which it drains to 0 at the limit
--             of its last write. The key expires at x, when it equals a missing key.
-- ARGV[...]   as lib/read_call.lua; burst_i is the capacity in emission intervals.
-- Returns     as lib/run_call.lua, with token_bucket's meanings.

-- @include lib/int.lua
-- @include lib/read_call.lua
-- @include lib/run_call.lua
-- @include lib/bucket_step.lua

local call, err = read_call('gcra')
if err then return err end

local function step(i, pending, charge)
  local key = KEYS[i]
  local debt, at = 0, call.now
  local stored = redis.call('GET', key)
  if stored then
    local t, d, x = string.match(stored, '^(%d+);(%d+);(%d+)$')
    if t ~= nil and tonumber(x) > call.now then debt, at = tonumber(d), tonumber(t) end
  end
  return bucket_step(call, i, debt, at, pending, charge, function(d, t, expire_at)
    redis.call('SET', key, int(t) .. ';' .. int(d) .. ';' .. int(expire_at))
    redis.call('PEXPIREAT', key, int(expire_at))
  end)
end

return run_call(call, step, false)
