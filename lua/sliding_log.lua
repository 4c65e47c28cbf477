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
-- @include lib/read_call.lua
-- @include lib/run_call.lua

local call, err = read_call('sliding_log')
if err then return err end
local now = call.now

local function member(before, h)
  return string.format('%015d', before) .. ':' .. int(h)
end

-- The hits logged before an entry, and its own.
local function parse(m)
  return tonumber(string.sub(m, 1, 15)), tonumber(string.sub(m, 17))
end

-- The live part of the log (scores above `live`): the hits logged before it, the total hits
-- in it, and its newest score; nil when it is empty. (The newest entry is live when any is.)
local function live_run(key, live)
  local first = redis.call('ZRANGEBYSCORE', key, live, '+inf', 'LIMIT', 0, 1)[1]
  if first == nil then return nil end
  local base = parse(first)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  local before, h = parse(last[1])
  return { base = base, count = before + h - base, newest = tonumber(last[2]), newest_end = before + h }
end

-- Score of the n-th oldest live hit (1-based): the entry whose hits hold it, found by a binary
-- search over the ranks of the live entries (the hits before an entry grow with its rank).
local function nth_oldest(key, run, live, n)
  local target = run.base + n - 1
  local lo = redis.call('ZCOUNT', key, '-inf', string.sub(live, 2))
  local hi = redis.call('ZCARD', key) - 1
  while lo < hi do
    local mid = math.floor((lo + hi + 1) / 2)
    local before = parse(redis.call('ZRANGE', key, mid, mid)[1])
    if before <= target then lo = mid else hi = mid - 1 end
  end
  return tonumber(redis.call('ZRANGE', key, lo, lo, 'WITHSCORES')[2])
end

-- Live hits at or before now (they leave the window first).
local function hits_not_later(key, run, live)
  local m = redis.call('ZREVRANGEBYSCORE', key, int(now), live, 'LIMIT', 0, 1)[1]
  if m == nil then return 0 end
  local before, h = parse(m)
  return before + h - run.base
end

-- Logs `h` hits at now, the expired entries being gone already; the live run after it.
local function log_hits(key, h, run)
  if run == nil then
    redis.call('ZADD', key, int(now), member(0, h))
    return { base = 0, count = h, newest = now, newest_end = h }
  end
  if run.newest <= now then
    redis.call('ZADD', key, int(now), member(run.newest_end, h))
    return { base = run.base, count = run.count + h, newest = now, newest_end = run.newest_end + h }
  end
  -- The clock stepped back: the new entry goes among the others, which are renumbered.
  local all = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
  redis.call('DEL', key)
  local before, placed = 0, false
  for j = 1, #all, 2 do
    if not placed and tonumber(all[j + 1]) > now then
      redis.call('ZADD', key, int(now), member(before, h))
      before, placed = before + h, true
    end
    local _, eh = parse(all[j])
    redis.call('ZADD', key, all[j + 1], member(before, eh))
    before = before + eh
  end
  return { base = 0, count = before, newest = run.newest, newest_end = before }
end

local function step(i, pending, charge)
  local key, h, limit, w = KEYS[i], call.hits[i], call.limits[i], call.windows[i]
  local cutoff = now - w
  local live = '(' .. int(cutoff)
  local run = live_run(key, live)
  local count = run and run.count or 0
  local wanted = pending + h
  local allowed = wanted <= limit and count + wanted <= limit
  if allowed and charge and h > 0 then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', int(cutoff))
    run = log_hits(key, h, run)
    count = run.count
    redis.call('PEXPIREAT', key, int(run.newest + w))
  end
  local reset_ms = 0
  if count > 0 then reset_ms = run.newest + w - now end
  local blocked_ms = 0
  if count >= limit then blocked_ms = nth_oldest(key, run, live, count - limit + 1) + w - now end
  if allowed then
    return count, math.max(0, limit - count), reset_ms, 0, 0, blocked_ms
  end
  local retry_ms
  if wanted > limit then
    retry_ms = math.max(1, reset_ms)
  else
    -- The n-th oldest of the live hits and the pending ones (at now) must leave the window.
    local n = count + wanted - limit
    local not_later = hits_not_later(key, run, live)
    if n <= not_later then
      retry_ms = nth_oldest(key, run, live, n) + w - now
    elseif n <= not_later + pending then
      retry_ms = w
    else
      retry_ms = nth_oldest(key, run, live, n - pending) + w - now
    end
  end
  return count, math.max(0, limit - count), reset_ms, retry_ms, 1, blocked_ms
end

return run_call(call, step, false)
