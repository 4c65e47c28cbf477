-- lib/read_lists.lua: the call layout of the list scripts (lua/limit_list.lua and
-- lua/fixed_window_list.lua), read and checked whole before any list runs, so that a malformed
-- call changes nothing. Needs lib/call_now.lua first.
--
-- After the mode (ARGV[1]), each list: its key count m (>= 1), then `width` ARGV for each of its
-- keys, each key's name first in mode 3 (a Redis Cluster node's merged call: KEYS[1] only routes
-- it, and the lists end where ARGV does); otherwise the lists cover KEYS exactly. Then,
-- optionally, a pinned now (tests only).
--
-- Provides
--   read_lists(script, mode, width, read_key) -> keys, ends, now; or nil and an error reply
--     `ERR <script>: ...`. keys[i]: counter i's name; ends[l]: the index of list l's last key;
--     now: epoch ms (lib/call_now.lua). read_key(i, at) reads key i's `width` ARGV, from
--     ARGV[at], and returns nil, or what is wrong with them. A list that names one counter twice
--     is refused: judged twice against one state, it would be charged from a stale read.

local function read_lists(script, mode, width, read_key)
  local argv, nargs, keys, n = ARGV, #ARGV, KEYS, #KEYS
  local function refuse(...)
    return nil, redis.error_reply('ERR ' .. script .. ': ' .. string.format(...))
  end
  local stride = width
  if mode == 3 then
    if n ~= 1 then return refuse('mode 3 declares 1 key (it routes the call), got %d', n) end
    stride, keys = width + 1, {}
    n = math.huge -- the lists say how many counters there are
  end
  local ends, at, taken = {}, 2, 0 -- `at`: the next ARGV to read; `taken`: the keys read so far
  -- In mode 3 the lists end where ARGV does (or one before it: a pinned now).
  while taken < n and (mode ~= 3 or at < nargs) do
    local list = #ends + 1
    local m = tonumber(argv[at])
    if not (m and m >= 1 and m < 9007199254740992 and m == math.floor(m)) then
      return refuse('list %d: key count (ARGV[%d]) must be a whole number >= 1', list, at)
    end
    if taken + m > n then return refuse('list %d: %d keys from KEYS[%d] run past the %d keys', list, m, taken + 1, n) end
    if at + stride * m > nargs then
      return refuse('list %d: %d keys need ARGV[%d..%d], the call has %d ARGV', list, m, at + 1, at + stride * m, nargs)
    end
    for i = taken + 1, taken + m do
      local first = at + 1 + stride * (i - taken - 1)
      if mode == 3 then
        keys[i] = argv[first]
        first = first + 1
      end
      local wrong = read_key(i, first)
      if wrong ~= nil then return refuse('%s', wrong) end
      local key = keys[i]
      for j = taken + 1, i - 1 do
        if keys[j] == key then return refuse('list %d holds one counter twice (KEYS[%d] and KEYS[%d])', list, j, i) end
      end
    end
    taken, at = taken + m, at + stride * m + 1
    ends[list] = taken
  end
  if mode == 3 and taken == 0 then return refuse('mode 3 needs at least one list after the mode') end
  if nargs - at + 1 > 1 then
    return refuse('the lists end at ARGV[%d]; only a pinned now may follow them, got %d ARGV', at - 1, nargs - at + 1)
  end
  local now = call_now(nargs == at and argv[nargs] or nil)
  if now == nil then return refuse('pinned now (last ARGV) must be epoch milliseconds') end
  return keys, ends, now
end
