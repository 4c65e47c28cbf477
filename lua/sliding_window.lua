-- sliding_window: an epoch-aligned window whose estimate carries a decaying share of the
-- previous window: estimate = prev × (1 − elapsed / W) + curr. One call checks n keys of one
-- hash slot. Only admitted hits count.
--
-- KEYS[i]     counter i (i = 1..n): a hash {s = start of the current window (epoch ms),
--             c = admitted hits in it, p = admitted hits in the window before}. Written only
--             with an expiry at the end of the next window, when its state no longer matters.
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
--             used_i         ceil(estimate) after this call
--             remaining_i    max(0, floor(limit_i − estimate)) after this call
--             reset_ms_i     ms until the estimate decays to 0 without more hits: the end of
--                            the next window when the current one has hits, else the end of
--                            this window when the previous one had some, else 0
--             retry_after_ms_i  0 when allowed; when denied, ms (>= 1) until estimate + hits_i
--                            <= limit_i without more hits (in this window while prev decays,
--                            else in the next one); hits_i > limit_i never fits: max(1, reset)
--             denied_i       1 when estimate + hits_i > limit_i (evaluated before charging), else 0.
--                            Compared scaled by W in integers:
--                            prev × (W − elapsed) + (curr + hits) × W <= limit × W.
-- Errors      "ERR sliding_window: ..." when ARGV does not fit KEYS or a number is invalid.

-- @include lib/args.lua
-- @include lib/admitted.lua

local call, err = read_call('sliding_window', 4)
if err then return err end
local now, hits, limits, windows = call.now, call.hits, call.limits, call.windows

local function step(i, charge)
  local key, h, limit, w = KEYS[i], hits[i], limits[i], windows[i]
  local start = now - (now % w)
  local elapsed = now - start
  local curr, prev = 0, 0
  local s = redis.call('HMGET', key, 's', 'c', 'p')
  local stored = tonumber(s[1])
  if stored == start then
    curr, prev = tonumber(s[2]) or 0, tonumber(s[3]) or 0
  elseif stored == start - w then
    prev = tonumber(s[2]) or 0
  end
  local weighted = prev * (w - elapsed)
  local allowed = weighted + (curr + h) * w <= limit * w
  if allowed and charge and h > 0 then
    curr = curr + h
    redis.call('HSET', key, 's', int(start), 'c', int(curr), 'p', int(prev))
    -- The end of the next window, as a relative expiry: the same as PEXPIREAT on redis TIME,
    -- and still a real TTL when a test pins "now" away from the server's clock.
    redis.call('PEXPIRE', key, int(start + 2 * w - now))
  end
  local used = math.ceil((weighted + curr * w) / w)
  local reset_ms = 0
  if curr > 0 then
    reset_ms = start + 2 * w - now
  elseif prev > 0 then
    reset_ms = start + w - now
  end
  if allowed then
    return used, math.max(0, limit - used), reset_ms, 0, 0
  end
  local retry_ms
  if h > limit then
    retry_ms = math.max(1, reset_ms)
  else
    local room = limit - curr - h
    if room >= 0 and prev > 0 then
      -- The first whole ms e of this window with prev × (W − e) <= room × W.
      local e = w - math.floor((room * w) / prev)
      if e < w then retry_ms = e - elapsed end
    end
    if retry_ms == nil then
      -- In the next window curr becomes prev: first e with curr × (W − e) <= (limit − hits) × W.
      local e = 0
      if curr > 0 then e = math.max(0, w - math.floor(((limit - h) * w) / curr)) end
      retry_ms = w + e - elapsed
    end
  end
  return used, math.max(0, limit - used), reset_ms, retry_ms, 1
end

return answer(call, step)
