-- sliding_log: exact; every admitted call is one entry of a sorted set scored by its time and
-- carrying its hits, which count while now − score < W. One entry per call whatever its hits,
-- so a call costs O(log n) however many hits it brings; only admitted hits are logged, so a
-- key holds at most `limit` entries (requests_per_unit is bounded when rules load), and hits
-- above the limit are refused before anything is read or written.
-- Protocol: lib/read_call.lua (KEYS, ARGV), lib/run_call.lua (modes, Returns).
--
-- KEYS[i]     log i: a sorted set; score = epoch ms of the call; member "<before>:<hits>",
--             <before> zero-padded to 15 digits: the hits logged before this entry, in the
--             set's order (score, then member), so that the hits of any run of entries are a
--             difference of two members and the n-th oldest hit is a binary search. Members
--             are unique (hits >= 1). A call at a time earlier than the newest entry (the
--             clock stepped back) renumbers the live entries. Entries that left the window are
--             removed when the key is written; the key expires W after its newest entry.
-- ARGV[...]   as lib/read_call.lua.
-- Returns     as lib/run_call.lua, per key: used = hits in the window; remaining =
--             max(0, limit − used); reset_ms = until the log is empty (newest + W − now, 0 when
--             empty); retry_after_ms = until enough of the oldest hits (pending hits count
--             as hits at now) leave for hits to fit (hits > limit: max(1, reset_ms));
--             blocked_ms = until one slot frees (0 while one is free).

-- @include lib/int.lua
-- @include lib/sliding_log_step.lua
-- @include lib/read_mode.lua
-- @include lib/read_call.lua
-- @include lib/run_call.lua

local call, err = read_call('sliding_log')
if err then return err end
local now = call.now

local function step(i, pending, charge)
  return sliding_log_step(KEYS[i], now, call.windows[i], call.hits[i], call.limits[i], pending, charge)
end

return run_call(call, step)
