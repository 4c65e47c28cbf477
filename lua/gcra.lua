-- gcra: the generic cell rate algorithm, the token bucket's contract with one value per key.
-- Emission interval T = W / limit; allowed iff max(TAT, now) + hits × T − now <= burst × T,
-- then TAT = max(TAT, now) + hits × T. Computed scaled by limit (T × limit = W) in integers:
-- debt = limit × (max(TAT, now) − now) is exactly the token bucket's capacity − tokens, so
-- gcra and token_bucket give the same answers to the same hits. One call checks n keys of one
-- hash slot. Only admitted hits move TAT.
--
-- KEYS[i]     key i (i = 1..n): the string "<ms>:<rem>", TAT = ms + rem / limit exactly
--             (0 <= rem < limit). It expires at TAT, when it equals a missing key.
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
-- ARGV[4i+1]  burst_i: integer >= 0 (capacity in emission intervals; the rule's burst, default limit).
-- ARGV[4n+2]  optional, tests only: "now" in epoch milliseconds. Without it the clock is
--             redis TIME, read once per call.
--
-- Returns     a flat array of 5n integers; key i fills positions 5i-4 .. 5i:
--             used_i         burst_i − remaining_i: tokens taken and not yet refilled
--             remaining_i    whole tokens left after this call
--             reset_ms_i     ms until TAT (the bucket is full again; 0 when TAT <= now)
--             retry_after_ms_i  0 when allowed; when denied, ms (>= 1) until hits_i tokens are
--                            there; hits_i > burst_i never fits: max(1, reset_ms_i)
--             denied_i       1 when fewer than hits_i tokens are there (before charging), else 0
-- Errors      "ERR gcra: ..." when ARGV does not fit KEYS or a number is invalid.

-- @include lib/args.lua
-- @include lib/bucket.lua
-- @include lib/admitted.lua

local call, err = read_call('gcra', 4)
if err then return err end
local now, limits = call.now, call.limits

local function step(i, charge)
  local key, limit = KEYS[i], limits[i]
  local debt = 0
  local stored = redis.call('GET', key)
  if stored then
    local ms, rem = string.match(stored, '^(%d+):(%d+)$')
    if ms ~= nil then debt = math.max(0, limit * (tonumber(ms) - now) + tonumber(rem)) end
  end
  return decide(call, i, debt, charge, function(after, ttl_ms)
    local whole_ms = math.floor(after / limit)
    redis.call('SET', key, int(now + whole_ms) .. ':' .. int(after - whole_ms * limit), 'PX', int(ttl_ms))
  end)
end

return answer(call, step)
