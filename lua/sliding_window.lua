-- sliding_window: epoch-aligned windows whose estimate carries a decaying share of the
-- previous window: estimate = prev × (1 − elapsed / W) + curr. Only admitted hits count.
-- Protocol: lib/read_call.lua (KEYS, ARGV), lib/run_call.lua (modes, Returns).
--
-- KEYS[i]     counter i: a hash {s = start of the latest window written (epoch ms), c = admitted
--             hits in it, p = admitted hits in the window before}. A call whose window is s
--             reads (c, p); s + W (next window) reads (0, c); s − W (the clock stepped back one
--             window) reads (p, 0) and charges p; any other window reads (0, 0), and a charge
--             more than one window behind s is not kept. The key expires when window s + W
--             ends, when its state no longer matters.
-- ARGV[...]   as lib/read_call.lua.
-- Returns     as lib/run_call.lua, per key: used = ceil(estimate); remaining =
--             max(0, limit − used); reset_ms = until every kept window with hits has decayed
--             (window start + 2 W); retry_after_ms = until estimate + pending + hits <= limit
--             without more hits, in this window while prev decays, else in the next one
--             (hits > limit: max(1, reset_ms)); blocked_ms = that wait for a 1-hit request.
--             Compared scaled by W in integers: prev × (W − elapsed) + (curr + hits) × W <= limit × W.

-- @include lib/int.lua
-- @include lib/sliding_window_step.lua
-- @include lib/read_mode.lua
-- @include lib/read_call.lua
-- @include lib/run_call.lua

local call, err = read_call('sliding_window')
if err then return err end
local now = call.now

local function step(i, pending, charge)
  return sliding_window_step(KEYS[i], now, call.windows[i], call.hits[i], call.limits[i], pending, charge)
end

return run_call(call, step)
