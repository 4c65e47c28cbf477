-- fixed_window: epoch-aligned fixed windows, every charged hit counted, also over the limit (the
-- reference's behaviour). The storage is lib/fixed_window_step.lua's: one key per counter and
-- window, the window in its name, so a hit is one INCRBY (and the window's first hit a
-- PEXPIREAT). The protocol is this script's own and lean (issue 20: Redis CPU per decision):
-- the script counts and says how long the window lasts; the caller judges, from the count, the
-- limit and the hits it sent, what lib/run_call.lua's scripts judge in Lua:
--   denied      count > limit (count and stop modes: the count includes the hits when charged);
--               count + hits > limit (look mode: nothing charged)
--   remaining   max(0, limit - count);  retry_after_ms = reset_ms when denied, else 0
--   blocked_ms  reset_ms once count >= limit, else 0
--
-- KEYS[i]     counter i's window key as the caller's clock places the call,
--             "<counter>:<window start, epoch s>" (lib/fixed_window_step.lua: Redis' TIME decides
--             the window; the declared key routes the call, also while its slot migrates); all
--             keys of one call share a hash slot. A key may appear more than once: each occurrence is judged on
--             its own and, in count mode, charged in turn, as the reference's pipeline of INCRBY.
-- ARGV[1]     mode: 0 = count: each counter in turn charged its hits (hits 0: read only);
--             1 = stop (STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, the reference's rule), unit by
--             unit (a unit: one request's counters; the units of concurrent requests merge into
--             one call, each decided on its own, in order): every counter of the unit looked at
--             first; when none would go over (count + hits > limit) all are counted; else, in
--             order, each one that would go over is charged and the others are answered with the
--             count the charges before them left, nothing charged;
--             2 = look: nothing charged, each counter's count as it stands;
--             3 = count, the counters named in ARGV (a Redis Cluster node's merged call, issue
--             20): KEYS[1] is the first counter, declared only to route the call to its node,
--             and the counters may be of any slot of the node. A counter the node does not
--             serve (its slot moved, or the server refuses keys of several slots in one script)
--             is answered count -1, nothing read or written: the caller sends it again through
--             its slot;
--             4 = stop, the counters named in ARGV, as mode 3 names them (a unit whose slot the
--             node does not serve is answered count -1 for each of its counters, nothing
--             written);
--             5 = look, the counters named in ARGV, as mode 3 names them.
-- ARGV[3i-1 .. 3i+1]  counter i's hits (>= 0, in plain decimal digits), limit (>= 0; read in
--             stop mode), window (whole seconds >= 1). In modes 3 and 5 four a counter, its name first: ARGV[4i-2 .. 4i+1].
--             In modes 1 and 4 each unit is led by its key count, then its counters' three (in mode
--             4 each counter's name first; lib/read_lists.lua): one unit of n keys in mode 1 is
--             ARGV[2] = n, key i's at ARGV[3i .. 3i+2].
-- ARGV[last]  optional, tests only: "now" in epoch milliseconds. Without it the clock is redis
--             TIME, read once per call.
-- Returns     2 integers a counter: count (the window's count after this call; -1: not served
--             here), reset_ms (until the window ends, >= 1).

-- @include lib/int.lua
-- @include lib/fixed_window_step.lua
-- @include lib/fixed_window_args.lua
-- @include lib/fixed_window_reader.lua
-- @include lib/not_served_here.lua
-- @include lib/call_now.lua
-- @include lib/read_lists.lua

local argv, keys, floor, tonumber = ARGV, KEYS, math.floor, tonumber
local nargs, n = #ARGV, #KEYS
local function refuse(...)
  return redis.error_reply('ERR fixed_window: ' .. string.format(...))
end

local mode = tonumber(argv[1])
if mode ~= 0 and mode ~= 1 and mode ~= 2 and mode ~= 3 and mode ~= 4 and mode ~= 5 then
  return refuse('mode (ARGV[1]) must be 0, 1, 2, 3, 4 or 5')
end

-- Every counter read and checked before any is counted: a malformed call changes nothing.
local hits, hit_texts, limits, windows = {}, {}, {}, {}
local read_counter = fixed_window_reader(hits, hit_texts, limits, windows)

local now, ends
if mode == 1 or mode == 4 then
  -- Stop units, each led by its key count (lib/read_lists.lua); a counter may appear twice.
  keys, ends, now = read_lists({ script = 'fixed_window', noun = 'unit', named = mode == 4, width = 3, distinct = false, read_key = read_counter })
  if keys == nil then return ends end
  n = ends[#ends] or 0
else
  local width = 3
  if mode == 3 or mode == 5 then
    width, keys = 4, {}
    n = floor((nargs - 1) / 4)
    if n < 1 or #KEYS ~= 1 or (nargs ~= 4 * n + 1 and nargs ~= 4 * n + 2) then
      return refuse('mode %d needs 1 key and 4 ARGV per counter after the mode (and an optional pinned now), got %d keys and %d ARGV', mode, #KEYS, nargs)
    end
  elseif nargs ~= 3 * n + 1 and nargs ~= 3 * n + 2 then
    return refuse('%d keys need %d or %d ARGV, got %d', n, 3 * n + 1, 3 * n + 2, nargs)
  end
  now = call_now(nargs == width * n + 2 and argv[nargs] or nil)
  if now == nil then return refuse('pinned now (last ARGV) must be epoch milliseconds') end
  for i = 1, n do
    local at = width * i - 1
    if width == 4 then keys[i] = argv[at - 1] end
    local wrong = read_counter(i, at)
    if wrong ~= nil then return refuse('%s', wrong) end
  end
end

local out = {}
-- Counter i's count after `h` more hits (0: as it stands), answered in `out`.
local function tally(i, h)
  local count, reset_ms = fixed_window_step(keys[i], now, windows[i], h, hit_texts[i])
  out[2 * i - 1], out[2 * i] = count, reset_ms
  return count
end

if mode == 0 then
  for i = 1, n do tally(i, hits[i]) end
elseif mode == 2 then
  for i = 1, n do tally(i, 0) end
elseif mode == 3 or mode == 5 then
  for i = 1, n do
    -- The counter's first command fails when its slot is not this node's, before anything of
    -- it is written. (Redis 7 raises a table, Redis 6 its text.)
    local ok, err = pcall(tally, i, mode == 3 and hits[i] or 0)
    if not ok then
      if not not_served_here(type(err) == 'table' and err.err or tostring(err)) then error(err) end
      out[2 * i - 1], out[2 * i] = -1, 0
    end
  end
else
  -- Each unit (a request's counters) on its own, in order.
  local over = {}
  local function stop_unit(first, last)
    local any_over = false
    for i = first, last do
      over[i] = tally(i, 0) + hits[i] > limits[i]
      if over[i] then any_over = true end
    end
    for i = first, last do tally(i, (over[i] or not any_over) and hits[i] or 0) end
  end
  local first = 1
  for u = 1, #ends do
    local last = ends[u]
    if mode == 1 then
      stop_unit(first, last)
    else
      -- Named (mode 4): a unit's counters share a slot, and its first command, a read, fails
      -- when the slot is not this node's, before anything of it is written.
      local ok, err = pcall(stop_unit, first, last)
      if not ok then
        if not not_served_here(type(err) == 'table' and err.err or tostring(err)) then error(err) end
        for i = first, last do out[2 * i - 1], out[2 * i] = -1, 0 end
      end
    end
    first = last + 1
  end
end
return out
