-- reference_window: REDIS_KEY_LAYOUT=reference (issue 30), a fixed window counted in the reference's
-- own key (lib/reference_window_step.lua), so that envoyproxy/ratelimit pods and floodgate pods
-- count together during a rolling update. Everything else is lua/fixed_window.lua's: every
-- charged hit counted, also over the limit; the lean protocol (count and reset back, the caller
-- judges, algorithm-scripts.ts); the same modes with the same meaning.
--
-- KEYS[1]     the first counter; KEYS[i] counter i's window key as the caller's clock names it (src/limiter/reference-key.ts);
--             its window is the one counted in (the reference's keys carry no hash tag: a key
--             derived from Redis TIME could lie in another slot). A key may appear more than
--             once: each occurrence is judged and charged in turn. Named: KEYS[1] only routes.
-- ARGV[1]     the mode, by name (lib/read_mode.lua): count, look, stop, each with ':named' (a
--             Redis Cluster node's merged call, the counters of any of its slots named in ARGV;
--             the reference's keys carry no hash tag, so one request's may lie on several nodes).
--             As lua/fixed_window.lua: a counter (in stop, a unit) the node does not serve is
--             answered count -1, nothing written.
-- ARGV[4i-2 .. 4i+1]  counter i's hits (plain decimal digits), limit, unit (whole seconds >= 1),
--             expiry (whole seconds >= 1: the unit plus the jitter drawn for this hit); named,
--             its name first: ARGV[5i-3 .. 5i+1]. In stop each unit is led by its key count.
-- ARGV[last]  optional, tests only: "now" in epoch ms; without it Redis TIME, read once a call.
-- Returns     2 integers a counter: count (-1: not served here), reset_ms (until the window the
--             key names ends, 1 .. unit). A malformed call is refused whole, nothing written.

-- @include lib/reference_window_step.lua
-- @include lib/fixed_window_args.lua
-- @include lib/not_served_here.lua
-- @include lib/window_calls.lua
-- @include lib/call_now.lua
-- @include lib/read_lists.lua
-- @include lib/read_mode.lua

local argv, keys, floor = ARGV, KEYS, math.floor
local nargs, n = #ARGV, #KEYS
local function refuse(...)
  return redis.error_reply('ERR reference_window: ' .. string.format(...))
end

local mode, named = read_mode('reference_window', { 'count', 'stop', 'look', 'count:named', 'stop:named', 'look:named' })
if mode == nil then return named end

-- Every counter read and checked before any is counted: a malformed call changes nothing.
local hits, hit_texts, limits, windows, expiries = {}, {}, {}, {}, {}
local function read_counter(i, at)
  local h_text, e_text = argv[at], argv[at + 3]
  local h, l, w = fixed_window_args(h_text, argv[at + 1], argv[at + 2])
  local e = e_text and string.find(e_text, '^[1-9]%d*$') and tonumber(e_text)
  if h == nil or not e or e >= 9007199254740992 then
    return string.format('key %d needs integer hits >= 0, limit >= 0, unit >= 1, expiry >= 1 (ARGV[%d..%d])', i, at, at + 3)
  end
  hits[i], hit_texts[i], limits[i], windows[i], expiries[i] = h, h_text, l, w, e_text
end

local now, ends
if mode == 'stop' then
  keys, ends, now = read_lists({ script = 'reference_window', noun = 'unit', named = named, width = 4, distinct = false, read_key = read_counter })
  if keys == nil then return ends end
  n = ends[#ends] or 0
else
  local width = 4
  if named then
    width, keys = 5, {}
    n = floor((nargs - 1) / 5)
    if n < 1 or #KEYS ~= 1 or (nargs ~= 5 * n + 1 and nargs ~= 5 * n + 2) then
      return refuse('mode %s needs 1 key and 5 ARGV per counter after the mode (and an optional pinned now), got %d keys and %d ARGV', argv[1], #KEYS, nargs)
    end
  elseif nargs ~= 4 * n + 1 and nargs ~= 4 * n + 2 then
    return refuse('%d keys need %d or %d ARGV, got %d', n, 4 * n + 1, 4 * n + 2, nargs)
  end
  now = call_now(nargs == width * n + 2 and argv[nargs] or nil)
  if now == nil then return refuse('pinned now (last ARGV) must be epoch milliseconds') end
  for i = 1, n do
    local at = width * i - 2
    if named then keys[i] = argv[at - 1] end
    local wrong = read_counter(i, at)
    if wrong ~= nil then return refuse('%s', wrong) end
  end
end

return window_calls(function(i, h) return reference_window_step(keys[i], now, windows[i], h, hit_texts[i], expiries[i]) end, mode, named, n, hits, limits, ends)
