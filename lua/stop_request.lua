-- stop_request: STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT for a request whose counters take more
-- than one script otherwise (a `rate_limits` list beside another descriptor, mixed algorithms,
-- counters of several slots of one Redis Cluster node): the whole request decided in one atomic
-- call (issue 27), so that concurrent requests are decided one after another, each on the
-- counts the ones before it left. A unit is one request's counters, whatever their algorithms;
-- the units of concurrent requests merge into one call (call-coalescer.ts), each decided on its
-- own, in order, as separate calls in that order would decide them.
--
-- A unit is decided by the rule the scripts apply within one call, over all its counters:
--   look      every counter judged, nothing written: a fixed window of its own is over when
--             count + hits > limit (lua/fixed_window.lua's stop units; a counter named twice is
--             judged twice on the count as it stands, as the reference reads every key first); a
--             counter of another algorithm is judged as lib/run_call.lua's look judges (a counter
--             named twice sees the hits its earlier admitted occurrences would add); a list is
--             judged all or nothing, each limit on its counter as it stands.
--   none denied   every counter is charged, in order: a fixed window its hits (INCRBY), each
--             other counter as its script's stop mode charges (lib/run_call.lua: judged again with
--             nothing pending, charged when admitted), each list all or nothing, judged again.
--   else      only the fixed windows of their own that were over are charged (they count every
--             hit, as the reference increments each key that would go over), in order; the other
--             fixed windows of their own are answered with the count the charges before them
--             left, nothing charged; every other counter and list is answered with its look.
-- This is what the limiter decided with a look over every call of the request and then a
-- charge per call; here nothing can come between the look and the charge.
--
-- KEYS[1]     stop: the first counter; KEYS holds every counter of every unit, in order (one
--             slot, or one Redis server), each as lua/<algorithm>.lua takes it (a fixed window's:
--             its window key). stop:named: KEYS[1] only routes the call to its Redis Cluster node; each counter is
--             named in ARGV before its arguments, of any slot of the node. A unit whose counter
--             the node does not serve (its slot moved) is answered denied = 2 for every counter,
--             nothing written (the look, which comes first, only reads): the caller decides it
--             again another way.
-- ARGV[1]     the mode, by name (lib/read_mode.lua): stop, or stop:named (counters named in ARGV).
-- Then, for each unit: its key count m (>= 1), then for each of its counters (named: its
--             name first) six ARGV: part (0: a counter of its own; p >= 1: a member of the
--             unit's list p, a list's members consecutive), algorithm (1 fixed_window,
--             2 sliding_window, 3 token_bucket, 4 gcra, 5 sliding_log, 6 a fixed window in the
--             reference's own key, REDIS_KEY_LAYOUT=reference: lib/reference_window_step.lua,
--             judged as a fixed window of its own), hits (plain decimal digits), limit, window
--             (whole seconds), burst (for 6: the key's expiry, whole seconds >= 1).
-- ARGV[last]  optional, tests only: "now" in epoch ms; without it redis TIME, read once.
-- Returns     as lib/run_call.lua: 6 integers a counter, used, remaining, reset_ms,
--             retry_after_ms, denied, blocked_ms: the counter's state after the unit and the
--             judgement of its hits (a fixed window answers as algorithm-scripts.ts judges
--             lua/fixed_window.lua's count). A malformed call is refused whole (`ERR
--             stop_request: ...`) before any unit runs.

-- @include lib/int.lua
-- @include lib/fixed_window_step.lua
-- @include lib/reference_window_step.lua
-- @include lib/sliding_window_step.lua
-- @include lib/bucket_step.lua
-- @include lib/token_bucket_step.lua
-- @include lib/gcra_step.lua
-- @include lib/sliding_log_step.lua
-- @include lib/not_served_here.lua
-- @include lib/call_now.lua
-- @include lib/read_lists.lua
-- @include lib/read_mode.lua

local argv, floor, max = ARGV, math.floor, math.max

local mode, named = read_mode('stop_request', { 'stop', 'stop:named' })
if mode == nil then return named end
local parts, algorithms, hits, hit_texts, limits, windows, bursts = {}, {}, {}, {}, {}, {}, {}
-- A reference-layout window (algorithm 6): its expiry as ARGV wrote it; its reset once tallied.
local expiries, resets = {}, {}
local keys, ends, now = read_lists({ script = 'stop_request', noun = 'unit', named = named, width = 6, distinct = false, read_key = function(i, first)
  local p, a, l, w, b = tonumber(argv[first]), tonumber(argv[first + 1]), tonumber(argv[first + 3]), tonumber(argv[first + 4]), tonumber(argv[first + 5])
  -- Hits go to INCRBY as written (lib/fixed_window_step.lua): plain decimal digits only.
  local h_text = argv[first + 2]
  local h = (h_text == '0' or string.find(h_text, '^[1-9]%d*$')) and tonumber(h_text)
  if not (p and a and h and l and w and b and p >= 0 and a >= 1 and a <= 6 and l >= 0 and w >= 1 and b >= 0 and (a ~= 6 or b >= 1)
      and p < 9007199254740992 and h < 9007199254740992 and l < 9007199254740992 and w < 9007199254740992 and b < 9007199254740992
      and p == floor(p) and a == floor(a) and l == floor(l) and w == floor(w) and b == floor(b)) then
    return string.format('key %d needs part >= 0, algorithm 1..6, integer hits >= 0, limit >= 0, window >= 1, burst >= 0 (ARGV[%d..%d])',
      i, first, first + 5)
  end
  parts[i], algorithms[i], hits[i], hit_texts[i], limits[i], windows[i], bursts[i] = p, a, h, h_text, l, w * 1000, b
  -- A reference-layout window is a fixed window of its own in every rule below; only its storage differs.
  if a == 6 then algorithms[i], expiries[i] = 1, argv[first + 5] end
end })
if keys == nil then return ends end
local call = { now = now, hits = hits, limits = limits, windows = windows, bursts = bursts }

local out = {}
local function answer(i, u, r, reset, retry, denied, blocked)
  local at = 6 * i - 5
  out[at], out[at + 1], out[at + 2], out[at + 3], out[at + 4], out[at + 5] = u, r, reset, retry, denied, blocked
  return denied == 1
end

-- A fixed window's answer from its count (algorithm-scripts.ts's fixedWindowResult).
local function fixed_window_answer(i, count, denied)
  local limit, w = limits[i], windows[i]
  local reset_ms = resets[i] or w - now % w
  return answer(i, count, max(0, limit - count), reset_ms, denied and reset_ms or 0, denied and 1 or 0,
    count >= limit and reset_ms or 0)
end

-- Counter i's count after `h` more hits (0: read only).
local function tally(i, h, h_text)
  local e = expiries[i]
  if e == nil then return (fixed_window_step(keys[i], now, windows[i], h, h_text)) end
  local count, reset_ms = reference_window_step(keys[i], now, windows[i], h, h_text, e)
  resets[i] = reset_ms
  return count
end

-- An admitted-hits counter judged on top of `pending` hits, charged when `charge` and admitted;
-- with limit 0 every hit is denied and nothing read or written (lib/run_call.lua).
local function step(i, pending, charge)
  local a = algorithms[i]
  if limits[i] == 0 then
    local w = windows[i]
    local denied = hits[i] > 0 and 1 or 0
    return answer(i, 0, 0, w, denied * w, denied, w)
  end
  if a == 2 then return answer(i, sliding_window_step(keys[i], now, windows[i], hits[i], limits[i], pending, charge)) end
  if a == 3 then return answer(i, token_bucket_step(call, i, keys[i], pending, charge)) end
  if a == 4 then return answer(i, gcra_step(call, i, keys[i], pending, charge)) end
  return answer(i, sliding_log_step(keys[i], now, windows[i], hits[i], limits[i], pending, charge))
end

-- A list member judged as it stands, nothing written; true when it denies.
local function look_member(i)
  if algorithms[i] == 1 then
    local count = tally(i, 0, '0')
    return fixed_window_answer(i, count, count + hits[i] > limits[i])
  end
  return step(i, 0, false)
end

-- The list `first..last` judged again and, when every limit admits, charged; answered.
local function decide_list(first, last)
  local denied = false
  for i = first, last do
    if look_member(i) then denied = true end
  end
  if denied then return end
  for i = first, last do
    if algorithms[i] == 1 then
      fixed_window_answer(i, tally(i, hits[i], hit_texts[i]), false)
    else
      step(i, 0, true)
    end
  end
end

-- The end of the list that starts at i.
local function list_end(i, last)
  local j = i
  while j < last and parts[j + 1] == parts[i] do j = j + 1 end
  return j
end

-- The look of unit first..last: each counter's answer in `out`, nothing written. Returns
-- whether anything denies and, per fixed window of its own, whether it is over.
local function look(first, last)
  local any_denied, over, pending = false, {}, {}
  local i = first
  while i <= last do
    if parts[i] > 0 then
      local j = list_end(i, last)
      for k = i, j do
        if look_member(k) then any_denied = true end
      end
      i = j
    elseif algorithms[i] == 1 then
      local count = tally(i, 0, '0')
      over[i] = count + hits[i] > limits[i]
      fixed_window_answer(i, count, over[i])
      if over[i] then any_denied = true end
    else
      local key = keys[i]
      if step(i, pending[key] or 0, false) then
        any_denied = true
      else
        pending[key] = (pending[key] or 0) + hits[i]
      end
    end
    i = i + 1
  end
  return any_denied, over
end

-- Unit first..last decided (see the top).
local function decide(first, last)
  local any_denied, over = look(first, last)
  if any_denied then
    if next(over) == nil then return end
    local any_over = false
    for _, o in pairs(over) do
      if o then any_over = true end
    end
    if not any_over then return end
    for i = first, last do
      if over[i] ~= nil then
        local count = over[i] and tally(i, hits[i], hit_texts[i]) or tally(i, 0, '0')
        fixed_window_answer(i, count, count > limits[i])
      end
    end
    return
  end
  local i = first
  while i <= last do
    if parts[i] > 0 then
      local j = list_end(i, last)
      decide_list(i, j)
      i = j
    elseif algorithms[i] == 1 then
      local count = tally(i, hits[i], hit_texts[i])
      fixed_window_answer(i, count, count > limits[i])
    else
      step(i, 0, true)
    end
    i = i + 1
  end
end

local first = 1
for u = 1, #ends do
  local last = ends[u]
  if not named then
    decide(first, last)
  else
    -- Named: the look comes first and only reads, so a counter this node does not
    -- serve fails it before anything of the unit is written. (Redis 7 raises a table, Redis 6
    -- its text.)
    local ok, err = pcall(decide, first, last)
    if not ok then
      if not not_served_here(type(err) == 'table' and err.err or tostring(err)) then error(err) end
      for i = first, last do answer(i, 0, 0, 0, 0, 2, 0) end
    end
  end
  first = last + 1
end
return out
