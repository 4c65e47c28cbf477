-- sliding_log: exact; every admitted hit is an entry of a sorted set scored by its time, and it
-- counts while now − score < W. One call checks n keys of one hash slot. Only admitted hits are
-- logged, so a key holds at most `limit` entries: for small limits only. O(log n) per key.
--
-- KEYS[i]     log i (i = 1..n): a sorted set; member "<ms>-<seq>" (unique), score = epoch ms of
--             the hit. Entries that left the window are removed when the key is written; the
--             key expires W after its newest entry.
-- ARGV[1]     mode: 0 = check and charge key by key: an admitted key is charged, a denied one
--                 is not (only admitted hits count);
--             1 = all or nothing (STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT): when any key of this
--                 call is denied, no key is charged, and every key reports its uncharged state;
--             2 = look only: every key is evaluated with its hits and none is charged (the first
--                 pass when one request's keys span several calls). Not fixed_window's mode 2.
-- ARGV[4i-2]  hits_i: integer >= 0 for KEYS[i]; 0 = peek (read only, never creates or changes the key).
-- ARGV[4i-1]  limit_i: integer >= 0, requests per window; 0 denies every hit (a peek is allowed)
--             and returns used 0, remaining 0, reset_ms = retry_after_ms = window without
--             touching the key.
-- ARGV[4i]    window_i: window length in whole seconds (>= 1).
-- ARGV[4i+1]  burst_i: integer >= 0 (not used by this algorithm; part of the uniform layout).
-- ARGV[4n+2]  optional, tests only: "now" in epoch milliseconds. Without it the clock is
--             redis TIME, read once per call.
--
-- Returns     a flat array of 5n integers; key i fills positions 5i-4 .. 5i:
--             used_i         entries in the window after this call
--             remaining_i    max(0, limit_i − used_i)
--             reset_ms_i     ms until the log is empty: newest score + W − now (0 when empty)
--             retry_after_ms_i  0 when allowed; when denied, ms (>= 1) until enough of the
--                            oldest entries leave the window for hits_i to fit;
--                            hits_i > limit_i never fits: max(1, reset_ms_i)
--             denied_i       1 when count + hits_i > limit_i (before charging), else 0
-- Errors      "ERR sliding_log: ..." when ARGV does not fit KEYS or a number is invalid.

-- @include lib/args.lua
-- @include lib/admitted.lua

local call, err = read_call('sliding_log', 4)
if err then return err end
local now, hits, limits, windows = call.now, call.hits, call.limits, call.windows

local function step(i, charge)
  local key, h, limit, w = KEYS[i], hits[i], limits[i], windows[i]
  local cutoff = now - w
  local live = '(' .. int(cutoff)
  local count = redis.call('ZCOUNT', key, live, '+inf')
  local allowed = count + h <= limit
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
    redis.call('PEXPIRE', key, int(w))
  end
  local reset_ms = 0
  if count > 0 then
    local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    reset_ms = tonumber(newest[2]) + w - now
  end
  if allowed then
    return count, math.max(0, limit - count), reset_ms, 0, 0
  end
  local retry_ms
  if h > limit then
    retry_ms = math.max(1, reset_ms)
  else
    -- The (count + hits − limit)-th oldest live entry must leave the window.
    local nth = redis.call('ZRANGEBYSCORE', key, live, '+inf', 'WITHSCORES', 'LIMIT', count + h - limit - 1, 1)
    retry_ms = tonumber(nth[2]) + w - now
  end
  return count, math.max(0, limit - count), reset_ms, retry_ms, 1
end

return answer(call, step)
