-- fixed_window: epoch-aligned fixed windows, every charged hit counted, also over the limit (the
-- reference's behaviour). The storage is lib/fixed_window_step.lua's: one key per counter and
-- window, the window in its name, so a hit is one INCRBY (and the window's first hit a
-- PEXPIREAT). The protocol is lean (issue 20: Redis CPU per decision): the script counts and
-- says how long the window lasts; the caller (algorithm-scripts.ts) judges from the count:
--   denied      count > limit (count and stop: the count includes the hits charged);
--               count + hits > limit (look: nothing charged)
--   remaining   max(0, limit - count);  retry_after_ms = reset_ms when denied, else 0
--   blocked_ms  reset_ms once count >= limit, else 0
--
-- KEYS[i]     counter i's window key as the caller's clock places the call, "<counter>:<window
--             start, epoch s>" (Redis' TIME decides the window; the declared key routes the
--             call, also while its slot migrates); one hash slot a call. A key may appear more
--             than once: each occurrence is judged and charged in turn, as the reference's
--             pipeline of INCRBY. Named counters (below): KEYS[1] only, routing the call.
-- ARGV[1]     the mode, by name (lib/read_mode.lua), which says what is charged:
--             count  each counter in turn, its hits (hits 0: read only);
--             look   nothing: each counter's count as it stands;
--             stop   STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, unit by unit (a unit: one request's
--                    counters; concurrent requests' units merge, each decided on its own, in
--                    order): when no counter of the unit would go over (count + hits > limit),
--                    all are charged; else only those that would, in order, the others answered
--                    with the count the charges before them left.
--             With ':named' (a Redis Cluster node's merged call, issue 20) the counters are
--             named in ARGV and may be of any slot of the node; a counter (in stop, a unit) the
--             node does not serve is answered count -1, nothing written, for the caller to send
--             again through its slot.
-- ARGV[3i-1 .. 3i+1]  counter i's hits (>= 0, plain decimal digits), limit (>= 0; read in
--             stop), window (whole seconds >= 1); named, its name first: ARGV[4i-2 .. 4i+1]. In
--             stop each unit is led by its key count (lib/read_lists.lua): one unit of n keys is
--             ARGV[2] = n, key i's three at ARGV[3i .. 3i+2].
-- ARGV[last]  optional, tests only: "now" in epoch ms; without it Redis TIME, read once a call.
-- Returns     2 integers a counter: count (the window's count after this call; -1: not served
--             here), reset_ms (until the window ends, >= 1). A malformed call is refused whole
--             (`ERR fixed_window: ...`), nothing written.

-- @include lib/int.lua
-- @include lib/fixed_window_step.lua
-- @include lib/fixed_window_args.lua
-- @include lib/fixed_window_reader.lua
-- @include lib/not_served_here.lua
-- @include lib/window_calls.lua
-- @include lib/call_now.lua
-- @include lib/read_lists.lua
-- @include lib/read_mode.lua

local argv, keys, floor = ARGV, KEYS, math.floor
local nargs, n = #ARGV, #KEYS
local function refuse(...)
  return redis.error_reply('ERR fixed_window: ' .. string.format(...))
end

local mode, named = read_mode('fixed_window', { 'count', 'stop', 'look', 'count:named', 'stop:named', 'look:named' })
if mode == nil then return named end

-- Every counter read and checked before any is counted: a malformed call changes nothing.
local hits, hit_texts, limits, windows = {}, {}, {}, {}
local read_counter = fixed_window_reader(hits, hit_texts, limits, windows)

local now, ends
if mode == 'stop' then
  -- Stop units, each led by its key count (lib/read_lists.lua); a counter may appear twice.
  keys, ends, now = read_lists({ script = 'fixed_window', noun = 'unit', named = named, width = 3, distinct = false, read_key = read_counter })
  if keys == nil then return ends end
  n = ends[#ends] or 0
else
  local width = 3
  if named then
    width, keys = 4, {}
    n = floor((nargs - 1) / 4)
    if n < 1 or #KEYS ~= 1 or (nargs ~= 4 * n + 1 and nargs ~= 4 * n + 2) then
      return refuse('mode %s needs 1 key and 4 ARGV per counter after the mode (and an optional pinned now), got %d keys and %d ARGV', argv[1], #KEYS, nargs)
    end
  elseif nargs ~= 3 * n + 1 and nargs ~= 3 * n + 2 then
    return refuse('%d keys need %d or %d ARGV, got %d', n, 3 * n + 1, 3 * n + 2, nargs)
  end
  now = call_now(nargs == width * n + 2 and argv[nargs] or nil)
  if now == nil then return refuse('pinned now (last ARGV) must be epoch milliseconds') end
  for i = 1, n do
    local at = width * i - 1
    if named then keys[i] = argv[at - 1] end
    local wrong = read_counter(i, at)
    if wrong ~= nil then return refuse('%s', wrong) end
  end
end

return window_calls(function(i, h) return fixed_window_step(keys[i], now, windows[i], h, hit_texts[i]) end, mode, named, n, hits, limits, ends)
