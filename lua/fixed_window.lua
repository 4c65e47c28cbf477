-- fixed_window: epoch-aligned fixed windows, every charged hit counted, also over the limit (the
-- reference's behaviour); over when the count after the hits exceeds the limit. The window is
-- part of the stored value, not left to the key's expiry: a call at time T always counts in
-- the window that contains T, also in the millisecond at which redis has not yet expired the
-- previous window's key.
-- Protocol: lib/read_call.lua (KEYS, ARGV), lib/run_call.lua (modes, Returns); this script
-- counts every hit, so in stop mode each key that would go over is incremented and the others
-- are held back, as envoyproxy/ratelimit does with STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT.
--
-- KEYS[i]     counter i: the string "<s>:<c>:<p>": s = start of the latest window counted in
--             (epoch ms), c = its count, p = the count of the window before. A call whose window
--             is s counts in c, s − W (the clock stepped back one window) in p, a later window
--             starts afresh, and a count more than one window behind s is not kept. A plain
--             integer (a key of an older floodgate) is the count of the current window. The key
--             expires when the window after s ends (as the reference's per-window keys live one
--             window past their last write), so a clock that steps back across an edge still
--             finds the count it left there. One SET per write, with PXAT or KEEPTTL (so
--             Redis 6.2 or newer).
-- ARGV[...]   as lib/read_call.lua, mode 3 included (a cluster node's merged call, the
--             counters named in ARGV); burst_i is ignored.
-- Returns     as lib/run_call.lua, per key: used = the window's count after this call;
--             remaining = max(0, limit − used); reset_ms = until the window ends (>= 1);
--             retry_after_ms = reset_ms when denied; denied = count + hits > limit;
--             blocked_ms = reset_ms once the count reaches the limit, else 0.

-- @include lib/int.lua
-- @include lib/fixed_window_step.lua
-- @include lib/read_call.lua
-- @include lib/run_call.lua
-- @include lib/not_served_here.lua

local call, err = read_call('fixed_window', true)
if err then return err end
local now = call.now
-- Locals: a global or a field is a table lookup on every use, and step runs once a key.
local rpcall = redis.pcall
local keys, hits, limits, windows = call.keys, call.hits, call.limits, call.windows

local function step(i, _, charge)
  local key = keys[i]
  local value = rpcall('GET', key)
  if type(value) == 'table' then
    -- A counter named by the call (mode 3) that this node will not count here: its slot is
    -- not the node's (it moved), or the server refuses a script keys of several slots (a
    -- managed Redis may): nothing is read or written; the caller sends it again through its
    -- slot. A declared key is always served (Redis redirects the call otherwise); any other
    -- error stops the call.
    if not_served_here(value.err) then return 0, 0, 0, 0, 2, 0 end
    error(value)
  end
  return fixed_window_step(key, value, now, windows[i], hits[i], limits[i], charge)
end

return run_call(call, step, true)
