-- token_bucket: a bucket of capacity `burst` that refills `limit` tokens per window,
-- continuously. One call checks n keys of one hash slot. Only admitted hits take tokens.
-- Tokens are integers scaled by the window length (tokens × W ms): a refill over dt ms adds
-- exactly limit × dt, so no fraction is ever rounded away and no float crosses the boundary.
--
-- KEYS[i]     bucket i (i = 1..n): a hash {u = tokens × W, t = epoch ms of that value}. A
--             missing key is a full bucket; the key expires when the bucket would be full again.
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
-- ARGV[4i+1]  burst_i: integer >= 0 (bucket capacity in tokens; the rule's burst, default limit).
-- ARGV[4n+2]  optional, tests only: "now" in epoch milliseconds. Without it the clock is
--             redis TIME, read once per call.
--
-- Returns     a flat array of 5n integers; key i fills positions 5i-4 .. 5i:
--             used_i         burst_i − remaining_i: tokens taken and not yet refilled
--             remaining_i    whole tokens left after this call
--             reset_ms_i     ms until the bucket is full again (0 when full)
--             retry_after_ms_i  0 when allowed; when denied, ms (>= 1) until hits_i tokens are
--                            there; hits_i > burst_i never fits: max(1, reset_ms_i)
--             denied_i       1 when fewer than hits_i tokens are there (before charging), else 0
-- Errors      "ERR token_bucket: ..." when ARGV does not fit KEYS or a number is invalid.

-- @include lib/args.lua
-- @include lib/bucket.lua
-- @include lib/admitted.lua

local call, err = read_call('token_bucket', 4)
if err then return err end
local now, limits, windows, bursts = call.now, call.limits, call.windows, call.bursts

local function step(i, charge)
  local key, limit, w = KEYS[i], limits[i], windows[i]
  local capacity = bursts[i] * w
  local units = capacity
  local s = redis.call('HMGET', key, 'u', 't')
  local stored, at = tonumber(s[1]), tonumber(s[2])
  if stored ~= nil and at ~= nil then
    units = math.min(capacity, stored + limit * math.max(0, now - at))
  end
  return decide(call, i, capacity - units, charge, function(debt, ttl_ms)
    redis.call('HSET', key, 'u', int(capacity - debt), 't', int(now))
    redis.call('PEXPIRE', key, int(ttl_ms))
  end)
end

return answer(call, step)
