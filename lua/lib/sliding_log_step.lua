-- lib/sliding_log_step.lua: the sliding log's step, shared by lua/sliding_log.lua and
-- lua/limit_list.lua so that a log means the same to both (needs lib/int.lua first).
-- Provides
--   sliding_log_step(key, now, w, h, limit, pending, charge) -> used, remaining, reset_ms,
--     retry_after_ms, denied, blocked_ms: judges `h` hits at `now` against `limit` hits in the
--     last `w` ms, on top of `pending` hits that earlier occurrences of the key in the call
--     would add (0 in a list, which holds a counter once), reading the sorted set at `key`;
--     when the hits are admitted and `charge` is true, logs them (expired entries removed, one
--     ZADD, PEXPIREAT). See lua/sliding_log.lua for the layout and the answers.

local function sliding_log_step(key, now, w, h, limit, pending, charge)
  local function member(before, hits)
    return string.format('%015d', before) .. ':' .. int(hits)
  end

  -- The hits logged before an entry, and its own.
  local function parse(m)
    return tonumber(string.sub(m, 1, 15)), tonumber(string.sub(m, 17))
  end

  -- The live part of the log (scores above `live`): the hits logged before it, the total hits
  -- in it, and its newest score; nil when it is empty. (The newest entry is live when any is.)
  local function live_run(live)
    local first = redis.call('ZRANGEBYSCORE', key, live, '+inf', 'LIMIT', 0, 1)[1]
    if first == nil then return nil end
    local base = parse(first)
    local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    local before, eh = parse(last[1])
    return { base = base, count = before + eh - base, newest = tonumber(last[2]), newest_end = before + eh }
  end

  -- Score of the n-th oldest live hit (1-based): the entry whose hits hold it, found by a binary
  -- search over the ranks of the live entries (the hits before an entry grow with its rank).
  local function nth_oldest(run, live, n)
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
  local function hits_not_later(run, live)
    local m = redis.call('ZREVRANGEBYSCORE', key, int(now), live, 'LIMIT', 0, 1)[1]
    if m == nil then return 0 end
    local before, eh = parse(m)
    return before + eh - run.base
  end

  -- Logs `h` hits at now, the expired entries being gone already; the live run after it.
  local function log_hits(run)
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

  local cutoff = now - w
  local live = '(' .. int(cutoff)
  local run = live_run(live)
  local count = run and run.count or 0
  local wanted = pending + h
  local allowed = wanted <= limit and count + wanted <= limit
  if allowed and charge and h > 0 then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', int(cutoff))
    run = log_hits(run)
    count = run.count
    redis.call('PEXPIREAT', key, int(run.newest + w))
  end
  local reset_ms = 0
  if count > 0 then reset_ms = run.newest + w - now end
  local blocked_ms = 0
  if count >= limit then blocked_ms = nth_oldest(run, live, count - limit + 1) + w - now end
  if allowed then
    return count, math.max(0, limit - count), reset_ms, 0, 0, blocked_ms
  end
  local retry_ms
  if wanted > limit then
    retry_ms = math.max(1, reset_ms)
  else
    -- The n-th oldest of the live hits and the pending ones (at now) must leave the window.
    local n = count + wanted - limit
    local not_later = hits_not_later(run, live)
    if n <= not_later then
      retry_ms = nth_oldest(run, live, n) + w - now
    elseif n <= not_later + pending then
      retry_ms = w
    else
      retry_ms = nth_oldest(run, live, n - pending) + w - now
    end
  end
  return count, math.max(0, limit - count), reset_ms, retry_ms, 1, blocked_ms
end
