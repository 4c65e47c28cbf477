-- token_bucket: a bucket of capacity `burst` that refills `limit` tokens per window,
-- continuously. Only admitted hits take tokens. What is stored is the debt (tokens taken × W,
-- in integers: a refill over dt ms is exactly limit × dt), so a changed limit or burst applies
-- to what was used, and no fraction is ever rounded away. Decision: lib/bucket_step.lua.
-- Protocol: lib/read_call.lua (KEYS, ARGV), lib/run_call.lua (modes, Returns).
--
-- KEYS[i]     bucket i: a hash {d = debt, t = epoch ms of that debt (never moves back),
--             x = epoch ms at which it drains to 0 at the limit of its last write}. A missing
--             key, or one past x, is a full bucket; the key expires at x.
-- ARGV[...]   as lib/read_call.lua; burst_i is the capacity.
-- Returns     as lib/run_call.lua, per key: used = burst − remaining; remaining = whole tokens
--             left; reset_ms = until the bucket is full; retry_after_ms = until hits_i tokens
--             are there (hits_i > burst_i: max(1, reset_ms)); denied; blocked_ms = until one
--             token is there.

-- @include lib/int.lua
-- @include lib/read_mode.lua
-- @include lib/read_call.lua
-- @include lib/run_call.lua
-- @include lib/bucket_step.lua
-- @include lib/token_bucket_step.lua

local call, err = read_call('token_bucket')
if err then return err end

local function step(i, pending, charge)
  return token_bucket_step(call, i, KEYS[i], pending, charge)
end

return run_call(call, step)
