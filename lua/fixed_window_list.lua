-- fixed_window_list: `rate_limits` lists (issue 21) whose every limit is a fixed window, each
-- decided all or nothing, in the lean protocol of lua/fixed_window.lua (issue 21's Redis CPU: a
-- list of two costs its two INCRBY, not lua/limit_list.lua's general machinery). The storage is
-- lib/fixed_window_step.lua's, so a counter means the same here, in lua/fixed_window.lua and in
-- lua/limit_list.lua (which decides the lists that mix algorithms).
--
-- A list's counters are charged while they are judged, in order: one INCRBY each, the count
-- before it the judgement's. Once one would go over its limit (count + hits > limit) the list is
-- refused: the counters after it are only read (GET), and the charges before it, its own
-- included, are taken back (DECRBY; a key that held no count before is removed whole, as a count
-- of 0 is never stored). A window's first hit gets its expiry (PEXPIREAT) only once the list is
-- admitted. The call is atomic, so no one sees a tentative count. A hit refused by the burst
-- limit does not spend the daily quota, and a request refused by a list's first limit costs one
-- INCRBY and one DECRBY (or DEL), and a GET for each limit after it.
--
-- KEYS[1]     the first list's first counter. KEYS holds the counters of list 1, then those of
--             list 2, and so on: each its window key as the caller's clock places the call
--             (lua/fixed_window.lua's KEYS). A list's counters share the
--             descriptor's hash tag; a counter appears at most once in a list (refused
--             otherwise), and may appear in several lists: a later list sees what an earlier one
--             charged, as separate calls in that order would.
-- ARGV[1]     the mode, by name (lib/read_mode.lua): count = each list in turn, all or nothing;
--             look = nothing charged, each counter as it stands; count:named = as count, the
--             counters named in ARGV (a Redis Cluster node's merged call, as lua/fixed_window.lua's):
--             KEYS[1] only routes the call, and the lists may be of any slot of the node. A list
--             whose slot the node does not serve (it moved) is answered count -1 for each of its
--             keys, nothing written: the caller sends it again through its slot.
-- Then, for each list: its key count m (>= 1), then for each of its keys (named: its name
--             first) its hits (>= 0, in plain decimal digits), limit (>= 0) and window (whole
--             seconds >= 1). One list of n keys: ARGV[2] = n, key i's three at ARGV[3i .. 3i+2].
--             The lists cover KEYS exactly (named: ARGV); a count that runs past them is refused.
-- ARGV[last]  optional, tests only: "now" in epoch milliseconds. Without it Redis TIME, read once.
-- Returns     2 integers a key: count, reset. When the list was admitted (count, count:named), count
--             is the window's count after the list's hits (none, with hits 0) and reset the ms
--             until the window ends (>= 1). When the list was refused, or looked at (look),
--             nothing was charged: count is the window's count as it stands and reset is
--             negative, minus those ms. Count -1 (reset 0): not served here. The caller judges
--             each key from them (algorithm-scripts.ts): it denies when reset < 0 and count +
--             hits > limit. A malformed call is refused whole (an `ERR fixed_window_list: ...`
--             error reply) before any list runs.

-- @include lib/int.lua
-- @include lib/fixed_window_step.lua
-- @include lib/fixed_window_args.lua
-- @include lib/fixed_window_reader.lua
-- @include lib/not_served_here.lua
-- @include lib/call_now.lua
-- @include lib/read_lists.lua
-- @include lib/read_mode.lua

local argv = ARGV
local mode, named = read_mode('fixed_window_list', { 'count', 'look', 'count:named' })
if mode == nil then return named end
local hits, hit_texts, limits, windows = {}, {}, {}, {}
local keys, ends, now = read_lists({
  script = 'fixed_window_list', noun = 'list', named = named, width = 3, distinct = true,
  read_key = fixed_window_reader(hits, hit_texts, limits, windows),
})
if keys == nil then return ends end

local out = {}
-- The window keys charged so far in the list being decided (index → key), to take back, and the
-- expiry each window's first hit still needs (index → epoch ms): set once the list is admitted,
-- never needed when a refusal removes the key.
local charged, pending = {}, {}
local function take_back(first, last)
  for i = first, last do
    local key = charged[i]
    if key ~= nil then
      local before = out[2 * i - 1] - hits[i]
      -- A count of 0 is never stored: the key goes whole.
      if before == 0 then
        redis.call('DEL', key)
      else
        redis.call('DECRBY', key, hit_texts[i])
        if pending[i] then redis.call('PEXPIREAT', key, int(pending[i])) end
      end
      charged[i], pending[i] = nil, nil
      out[2 * i - 1] = before
    end
  end
end

-- List `first..last` decided (look: looked at), answered in `out`.
local function decide(first, last)
  local refused = false
  for i = first, last do
    local h = hits[i]
    if mode ~= 'look' and h > 0 and not refused then
      local count, reset_ms, key, expire_at = fixed_window_step(keys[i], now, windows[i], h, hit_texts[i], true)
      out[2 * i - 1], out[2 * i], charged[i], pending[i] = count, reset_ms, key, expire_at
      if count > limits[i] then refused = true end
    else
      local count, reset_ms = fixed_window_step(keys[i], now, windows[i], 0, '0')
      out[2 * i - 1], out[2 * i] = count, reset_ms
      if count + h > limits[i] then refused = true end
    end
  end
  if refused or mode == 'look' then
    take_back(first, last)
    for i = first, last do out[2 * i] = -out[2 * i] end
  else
    for i = first, last do
      if pending[i] then redis.call('PEXPIREAT', charged[i], int(pending[i])) end
      charged[i], pending[i] = nil, nil
    end
  end
end

local first = 1
for l = 1, #ends do
  local last = ends[l]
  -- A list that fails takes its charges back first, so it leaves nothing written. Named, the
  -- list's slot may not be this node's (it moved): its first command fails, before anything of
  -- it is written (its counters share a slot). (Redis 7 raises a table, Redis 6 its text.)
  local ok, err = pcall(decide, first, last)
  if not ok then
    take_back(first, last)
    if not (named and not_served_here(type(err) == 'table' and err.err or tostring(err))) then error(err) end
    for i = first, last do out[2 * i - 1], out[2 * i] = -1, 0 end
  end
  first = last + 1
end
return out
