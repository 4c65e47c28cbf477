-- lib/read_lists.lua: the call layout of a script that takes its keys in groups, each led by its
-- key count: the lists of lua/limit_list.lua and lua/fixed_window_list.lua, and the STOP-mode
-- units of lua/fixed_window.lua (a request's counters, held back together). The whole call is
-- read and checked before any group runs, so that a malformed call changes nothing. Needs
-- lib/call_now.lua first.
--
-- After the mode (ARGV[1]), each group: its key count m (>= 1), then `width` ARGV for each of its
-- keys, each key's name first when `named` (a Redis Cluster node's merged call: KEYS[1] only
-- routes it, and the groups end where ARGV does); otherwise the groups cover KEYS exactly.
-- Then, optionally, a pinned now (tests only).
--
-- Provides
--   read_lists(layout) -> keys, ends, now; or nil and an error reply `ERR <script>: ...`.
--     layout: script (its name, for errors), noun ('list', 'unit': what a group is called in
--     errors), named, width, distinct (a group that names one counter twice is refused: a list
--     judged twice against one state would be charged from a stale read), and read_key(i, at),
--     which reads key i's `width` ARGV from ARGV[at] and returns nil, or what is wrong with them.
--     keys[i]: counter i's name; ends[g]: the index of group g's last key; now: epoch ms.

local function read_lists(layout)
  local script, noun, named, width, read_key = layout.script, layout.noun, layout.named, layout.width, layout.read_key
  local argv, nargs, keys, n = ARGV, #ARGV, KEYS, #KEYS
  local function refuse(...)
    return nil, redis.error_reply('ERR ' .. script .. ': ' .. string.format(...))
  end
  local stride = width
  if named then
    if n ~= 1 then return refuse('mode %s declares 1 key (it routes the call), got %d', argv[1], n) end
    stride, keys = width + 1, {}
    n = math.huge -- the groups say how many counters there are
  end
  local ends, at, taken = {}, 2, 0 -- `at`: the next ARGV to read; `taken`: the keys read so far
  -- Named, the groups end where ARGV does (or one before it: a pinned now).
  while taken < n and (not named or at < nargs) do
    local group = #ends + 1
    local m = tonumber(argv[at])
    if not (m and m >= 1 and m < 9007199254740992 and m == math.floor(m)) then
      return refuse('%s %d: key count (ARGV[%d]) must be a whole number >= 1', noun, group, at)
    end
    if taken + m > n then return refuse('%s %d: %d keys from KEYS[%d] run past the %d keys', noun, group, m, taken + 1, n) end
    if at + stride * m > nargs then
      return refuse('%s %d: %d keys need ARGV[%d..%d], the call has %d ARGV', noun, group, m, at + 1, at + stride * m, nargs)
    end
    for i = taken + 1, taken + m do
      local first = at + 1 + stride * (i - taken - 1)
      if named then
        keys[i] = argv[first]
        first = first + 1
      end
      local wrong = read_key(i, first)
      if wrong ~= nil then return refuse('%s', wrong) end
      if layout.distinct then
        local key = keys[i]
        for j = taken + 1, i - 1 do
          if keys[j] == key then return refuse('%s %d holds one counter twice (KEYS[%d] and KEYS[%d])', noun, group, j, i) end
        end
      end
    end
    taken, at = taken + m, at + stride * m + 1
    ends[group] = taken
  end
  if named and taken == 0 then return refuse('mode %s needs at least one %s after the mode', argv[1], noun) end
  if nargs - at + 1 > 1 then
    return refuse('the %ss end at ARGV[%d]; only a pinned now may follow them, got %d ARGV', noun, at - 1, nargs - at + 1)
  end
  local now = call_now(nargs == at and argv[nargs] or nil)
  if now == nil then return refuse('pinned now (last ARGV) must be epoch milliseconds') end
  return keys, ends, now
end
