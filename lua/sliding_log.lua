-- sliding_log: exact; every admitted hit is an entry of a sorted set scored by its time, and it
-- counts while now − score < W. Only admitted hits are logged, so a key holds at most `limit`
-- entries, and hits above the limit are refused before anything is read or written:
-- requests_per_unit is bounded when rules load. O(log n) per entry.
-- Protocol: lib/read_call.lua (KEYS, ARGV), lib/run_call.lua (modes, Returns).
--
-- KEYS[i]     log i: a sorted set; member "<ms>-<seq>" (unique), score = epoch ms of the hit.
--             Entries that left the window are removed when the key is written; the key
--             expires W after its newest entry.
-- ARGV[...]   as lib/read_call.lua.
-- Returns     as lib/run_call.lua, per key: used = entries in the window; remaining =
--             max(0, limit − used); reset_ms = until the log is empty (newest + W − now, 0 when
--             empty); retry_after_ms = until enough of the oldest entries (pending hits count
--             as entries at now) leave for hits to fit (hits > limit: max(1, reset_ms));
--             blocked_ms = until one slot frees (0 while one is free).

-- @include lib/int.lua
-- @include lib/read_call.lua
-- @include lib/run_call.lua

local call, err = read_call('sliding_log')
if err then return err end
local now = call.now

-- Score of the n-th oldest live entry (1-based), live = scores above `live`.
local function nth_oldest(key, live, n)
  local nth = redis.call('ZRANGEBYSCORE', key, live, '+inf', 'WITHSCORES', 'LIMIT', n - 1, 1)
  return tonumber(nth[2])
end

local function step(i, pending, charge)
  local key, h, limit, w = KEYS[i], call.hits[i], call.limits[i], call.windows[i]
  local cutoff = now - w
  local live = '(' .. int(cutoff)
  local count = redis.call('ZCOUNT', key, live, '+inf')
  local wanted = pending + h
  local allowed = wanted <= limit and count + wanted <= limit
  if allowed and charge and h > 0 then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', int(cutoff))
    local seq = count
    for _ = 1, h do
      seq = seq + 1
      -- A member taken already (the clock stepped back) is skipped, never overwritten.
      while redis.call('ZADD', key, 'NX', int(now), int(now) .. '-' .. int(seq)) == 0 do
        seq = seq + 1
      end
    end
    count = count + h
  end
  local reset_ms = 0
  if count > 0 then
    local newest = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
    reset_ms = newest + w - now
    if allowed and charge and h > 0 then redis.call('PEXPIREAT', key, int(newest + w)) end
  end
  local blocked_ms = 0
  if count >= limit then blocked_ms = nth_oldest(key, live, count - limit + 1) + w - now end
  if allowed then
    return count, math.max(0, limit - count), reset_ms, 0, 0, blocked_ms
  end
  local retry_ms
  if wanted > limit then
    retry_ms = math.max(1, reset_ms)
  else
    -- The n-th oldest of the live entries and the pending ones (at now) must leave the window.
    local n = count + wanted - limit
    local not_later = redis.call('ZCOUNT', key, live, int(now))
    if n <= not_later then
      retry_ms = nth_oldest(key, live, n) + w - now
    elseif n <= not_later + pending then
      retry_ms = w
    else
      retry_ms = nth_oldest(key, live, n - pending) + w - now
    end
  end
  return count, math.max(0, limit - count), reset_ms, retry_ms, 1, blocked_ms
end

return run_call(call, step, false)
