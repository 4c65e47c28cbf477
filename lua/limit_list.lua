-- limit_list: `rate_limits` lists (issue 21) that mix algorithms (a list of fixed windows only
-- goes to lua/fixed_window_list.lua, leaner), each decided as one unit, several lists in one
-- atomic call (call-coalescer.ts merges the lists of concurrent requests into one call, as it
-- merges other scripts' keys). The lists run in order, each on its own: every limit of a list is
-- judged first; the hits are then charged to every counter of the list when all admit them, and
-- to none when any denies, whatever the algorithms (a fixed window included, which outside a
-- list counts every hit). A fixed window is charged while it is judged and the charge taken
-- back when the list is refused (one INCRBY, not a GET and an INCRBY): atomic, so the same. A list sees what the lists before it
-- charged, so lists that share a counter are judged exactly as separate calls in that order
-- would judge them. One TIME read serves the whole call. The steps are those of
-- lua/<algorithm>.lua, one per algorithm, over the same key layouts: the same code, from
-- lua/lib (fixed_window_step, sliding_window_step, token_bucket_step and gcra_step over
-- bucket_step, sliding_log_step), so a counter means the same to a list and to a rule of its own (test/integration/differential runs both
-- against the reference model).
--
-- KEYS[1]     the first list's first counter. KEYS holds the counters of list 1, then those of
--             list 2, and so on; KEYS[i] (i = 1..n) as lua/<algorithm_i>.lua takes it (a fixed
--             window's: its window key, lib/fixed_window_step.lua). All in
--             one slot (a list's counters share the descriptor's hash tag). A counter appears at
--             most once in a list (refused otherwise); it may appear in several lists.
-- ARGV[1]     the mode, by name (lib/read_mode.lua): count = decide and charge each list all
--             or none; look = judge only, charge nothing; count:named = as count, the counters
--             named in ARGV (a Redis Cluster node's merged call, issue 20): KEYS[1] only routes
--             the call, each key's name comes first of its ARGV (6 per key), and the lists may be
--             of any slot of the node. A list whose slot the node does not serve (it moved) is
--             answered with denied = 2 for each of its keys, nothing written: the caller sends it
--             again through its slot.
-- Then, for each list in the order of KEYS: its key count m (>= 1), then 5 ARGV per key of
--             the list: algorithm_i (1 fixed_window, 2 sliding_window, 3 token_bucket, 4 gcra,
--             5 sliding_log), hits_i, limit_i, window_i (whole seconds), burst_i, as
--             lib/read_call.lua. One list of n keys: ARGV[2] = n, key i's five at ARGV[5i-2 .. 5i+2].
--             The lists cover KEYS exactly; a count that runs past KEYS or ARGV is refused.
-- ARGV[last]  optional, tests only: "now" in epoch ms, the one ARGV after the lists; without it
--             redis TIME, read once.
-- Returns     as lib/run_call.lua: 6n integers, key i's used, remaining, reset_ms,
--             retry_after_ms, denied, blocked_ms. After a list's charge, each of its keys' state
--             after it; after a refusal (or a look), each key's judgement of its own hits, nothing
--             charged. A malformed call is refused whole (an `ERR limit_list: ...` error reply)
--             before any list runs.

-- @include lib/int.lua
-- @include lib/fixed_window_step.lua
-- @include lib/sliding_window_step.lua
-- @include lib/bucket_step.lua
-- @include lib/token_bucket_step.lua
-- @include lib/gcra_step.lua
-- @include lib/sliding_log_step.lua
-- @include lib/not_served_here.lua
-- @include lib/call_now.lua
-- @include lib/read_lists.lua
-- @include lib/read_mode.lua

local argv, floor = ARGV, math.floor

local mode, named = read_mode('limit_list', { 'count', 'look', 'count:named' })
if mode == nil then return named end
-- The shape lib/bucket_step.lua reads; `used[a]`: some key of the call counts with algorithm a.
local algorithms, hits, hit_texts, limits, windows, bursts, used = {}, {}, {}, {}, {}, {}, {}
local keys, ends, now = read_lists({ script = 'limit_list', noun = 'list', named = named, width = 5, distinct = true, read_key = function(i, first)
  -- A fixed window's hits go to INCRBY as written (lib/fixed_window_step.lua): plain decimal
  -- digits only, for every algorithm alike.
  local h_text = argv[first + 1]
  local h = (h_text == '0' or string.find(h_text, '^[1-9]%d*$')) and tonumber(h_text)
  local a, l, w, b = tonumber(argv[first]), tonumber(argv[first + 2]), tonumber(argv[first + 3]), tonumber(argv[first + 4])
  if not (a and h and l and w and b and a >= 1 and a <= 5 and h >= 0 and l >= 0 and w >= 1 and b >= 0
      and h < 9007199254740992 and l < 9007199254740992 and w < 9007199254740992 and b < 9007199254740992
      and a == floor(a) and h == floor(h) and l == floor(l) and w == floor(w) and b == floor(b)) then
    return string.format('key %d needs algorithm 1..5, integer hits >= 0, limit >= 0, window >= 1, burst >= 0 (ARGV[%d..%d])',
      i, first, first + 4)
  end
  algorithms[i], hits[i], limits[i], windows[i], bursts[i], used[a] = a, h, l, w * 1000, b, true
  hit_texts[i] = h_text
end })
if keys == nil then return ends end
local n = ends[#ends] or 0
local call = { n = n, now = now, algorithms = algorithms, hits = hits, limits = limits, windows = windows, bursts = bursts }

-- Each algorithm's step, defined only when a key of the call uses it (a definition is a
-- closure made on every call).
local STEPS = {}

-- Takes back the tentative charges of a refused list (fixed windows only; see below).
local fw_undo = nil

if used[1] then
  -- lib/fixed_window_step.lua. When the call may charge (not look), a hit is charged in the
  -- look already, one INCRBY instead of a GET now and an INCRBY later, and undone (fw_undo) when
  -- the list is refused: the call is atomic, so no one sees the tentative count. The look's
  -- answer is the count before it; the charge pass, which comes only when every limit of the
  -- list admitted, answers the count after it. A window's first hit gets its expiry in the
  -- charge pass (fw_pending): a refusal removes its key whole. An index belongs to one list and a
  -- list holds a counter once, so what is kept per index is still the key's when the charge or
  -- undo comes.
  local fw_before, fw_charged, fw_keys, fw_pending, fw_max = {}, {}, {}, {}, math.max

  local function fixed_window(i, charge)
    local h, limit, w = hits[i], limits[i], windows[i]
    local count
    if charge then
      count = fw_charged[i] or fw_before[i]
      if fw_pending[i] then
        redis.call('PEXPIREAT', fw_keys[i], int(fw_pending[i]))
        fw_pending[i] = nil
      end
    elseif mode ~= 'look' and h > 0 then
      local after, _, key, expire_at = fixed_window_step(keys[i], now, w, h, hit_texts[i], true)
      fw_charged[i], fw_before[i], fw_keys[i], fw_pending[i] = after, after - h, key, expire_at
      count = after - h
    else
      count = fixed_window_step(keys[i], now, w, 0, '0')
      fw_before[i] = count
    end
    local denied = not charge and count + h > limit
    local reset_ms = w - now % w
    return count, fw_max(0, limit - count), reset_ms, denied and reset_ms or 0, denied and 1 or 0,
      count >= limit and reset_ms or 0
  end
  STEPS[1] = fixed_window

  -- The list `first..last` was refused: its tentative fixed-window charges are taken back (a key
  -- that held no count before is removed whole: a count of 0 is never stored).
  fw_undo = function(first, last)
    for i = first, last do
      if fw_charged[i] ~= nil then
        if fw_before[i] == 0 then
          redis.call('DEL', fw_keys[i])
        else
          redis.call('DECRBY', fw_keys[i], hit_texts[i])
          if fw_pending[i] then redis.call('PEXPIREAT', fw_keys[i], int(fw_pending[i])) end
        end
        fw_charged[i], fw_pending[i] = nil, nil
      end
    end
  end
end

if used[2] then
  -- lib/sliding_window_step.lua; nothing pending: a list holds a counter once, and earlier
  -- lists' charges are stored.
  local function sliding_window(i, charge)
    return sliding_window_step(keys[i], now, windows[i], hits[i], limits[i], 0, charge)
  end
  STEPS[2] = sliding_window
end

if used[3] then
  -- lib/token_bucket_step.lua; nothing pending, as for the sliding window.
  local function token_bucket(i, charge)
    return token_bucket_step(call, i, keys[i], 0, charge)
  end
  STEPS[3] = token_bucket
end

if used[4] then
  -- lib/gcra_step.lua; nothing pending.
  local function gcra(i, charge)
    return gcra_step(call, i, keys[i], 0, charge)
  end
  STEPS[4] = gcra
end

if used[5] then
  -- lib/sliding_log_step.lua; nothing pending, as for the sliding window.
  local function sliding_log(i, charge)
    return sliding_log_step(keys[i], now, windows[i], hits[i], limits[i], 0, charge)
  end
  STEPS[5] = sliding_log
end

local out = {}
-- Key i judged (and charged when `charge`); true when it denies. As lib/run_call.lua: an
-- admitted-hits algorithm with limit 0 denies every hit without reading or writing its key.
local function judge(i, charge)
  local u, r, reset, retry, denied, blocked
  if limits[i] == 0 and algorithms[i] ~= 1 then
    local w = call.windows[i]
    denied = call.hits[i] > 0 and 1 or 0
    u, r, reset, retry, blocked = 0, 0, w, denied * w, w
  else
    u, r, reset, retry, denied, blocked = STEPS[algorithms[i]](i, charge)
  end
  local at = 6 * i - 5
  out[at], out[at + 1], out[at + 2], out[at + 3], out[at + 4], out[at + 5] = u, r, reset, retry, denied, blocked
  return denied == 1
end

-- List `first..last` judged, nothing charged; true when a limit denies.
local function look(first, last)
  local any_denied = false
  for i = first, last do
    if judge(i, false) then any_denied = true end
  end
  return any_denied
end

-- The look of a list; returns served, any_denied. A named call's list may be of a slot this
-- node does not serve (it moved): then the list's first command fails, before anything of it is
-- written (its counters share a slot), and the list is answered denied = 2. A look that fails
-- takes its tentative charges back first, so a failed list leaves nothing written. (Redis 7
-- raises a table, Redis 6 its text.)
local function look_here(first, last)
  local ok, res = pcall(look, first, last)
  if ok then return true, res end
  if fw_undo then fw_undo(first, last) end
  if named and not_served_here(type(res) == 'table' and res.err or tostring(res)) then return false, false end
  error(res)
end

-- Each list in turn, all or nothing: every limit judged, then all charged or none.
local first = 1
for l = 1, #ends do
  local last = ends[l]
  local served, any_denied = look_here(first, last)
  if not served then
    for i = first, last do
      local at = 6 * i - 5
      out[at], out[at + 1], out[at + 2], out[at + 3], out[at + 4], out[at + 5] = 0, 0, 0, 0, 2, 0
    end
  elseif mode ~= 'look' and not any_denied then
    for i = first, last do judge(i, true) end
  elseif mode ~= 'look' and fw_undo then
    fw_undo(first, last)
  end
  first = last + 1
end
return out
