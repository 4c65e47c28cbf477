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
-- @include lib/read_mode.lua
-- @include lib/read_call.lua
-- @include lib/run_call.lua
-- @include lib/bucket_step.lua
-- @include lib/gcra_step.lua

local call, err = read_call('gcra')
if err then return err end

local function step(i, pending, charge)
  return gcra_step(call, i, KEYS[i], pending, charge)
end

return run_call(call, step)
