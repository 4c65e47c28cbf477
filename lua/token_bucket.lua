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

local n = #KEYS
local nargs = #ARGV
if nargs ~= 4 * n + 1 and nargs ~= 4 * n + 2 then
  return redis.error_reply(string.format(
    'ERR token_bucket: %d keys need %d or %d ARGV, got %d', n, 4 * n + 1, 4 * n + 2, nargs))
end

-- A whole number >= min that a double holds exactly; nil otherwise (also for nan and inf).
local function whole(i, min)
  local v = tonumber(ARGV[i])
  if v ~= nil and v >= min and v < 9007199254740992 and v == math.floor(v) then
    return v
  end
  return nil
end

local mode = whole(1, 0)
if mode ~= 0 and mode ~= 1 and mode ~= 2 then
  return redis.error_reply('ERR token_bucket: mode (ARGV[1]) must be 0, 1 or 2')
end

local now
if nargs == 4 * n + 2 then
  now = whole(nargs, 0)
  if now == nil then
    return redis.error_reply('ERR token_bucket: pinned now (last ARGV) must be epoch milliseconds')
  end
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local hits, limits, windows, bursts = {}, {}, {}, {}
for i = 1, n do
  local h, l, w, b = whole(4 * i - 2, 0), whole(4 * i - 1, 0), whole(4 * i, 1), whole(4 * i + 1, 0)
  if h == nil or l == nil or w == nil or b == nil then
    return redis.error_reply(string.format(
      'ERR token_bucket: key %d needs integer hits >= 0, limit >= 0, window >= 1, burst >= 0 (ARGV[%d..%d])',
      i, 4 * i - 2, 4 * i + 1))
  end
  hits[i], limits[i], windows[i], bursts[i] = h, l, w * 1000, b
end

-- Numbers go to redis as '%d' strings: redis versions differ in how they print Lua doubles.
local function int(v)
  return string.format('%d', v)
end

-- The decision over the bucket's debt (capacity − tokens, in tokens × W), shared word for word
-- by token_bucket.lua and gcra.lua: the two differ in what they store, never in what they answer.
-- `store(debt, ttl_ms)` writes the charged state; called only when hits are admitted and charged.
-- Exact while burst × W stays below 2^53 (a day window: burst up to about 10^8).
local function decide(i, debt, charge, store)
  local h, limit, burst, w = hits[i], limits[i], bursts[i], windows[i]
  local capacity = burst * w
  local need = h * w
  local allowed = debt + need <= capacity
  if allowed and charge and h > 0 then
    debt = debt + need
    store(debt, math.ceil(debt / limit))
  end
  local remaining = math.max(0, math.floor((capacity - debt) / w))
  local reset_ms = math.ceil(debt / limit)
  if allowed then
    return burst - remaining, remaining, reset_ms, 0, 0
  end
  local retry_ms
  if h > burst then
    retry_ms = math.max(1, reset_ms)
  else
    retry_ms = math.ceil((debt + need - capacity) / limit)
  end
  return burst - remaining, remaining, reset_ms, retry_ms, 1
end

local function step(i, charge)
  local key, limit, w = KEYS[i], limits[i], windows[i]
  local capacity = bursts[i] * w
  local units = capacity
  local s = redis.call('HMGET', key, 'u', 't')
  local stored, at = tonumber(s[1]), tonumber(s[2])
  if stored ~= nil and at ~= nil then
    units = math.min(capacity, stored + limit * math.max(0, now - at))
  end
  return decide(i, capacity - units, charge, function(debt, ttl_ms)
    redis.call('HSET', key, 'u', int(capacity - debt), 't', int(now))
    redis.call('PEXPIRE', key, int(ttl_ms))
  end)
end

-- limit 0: every hit is denied, a peek allowed; nothing is read or written. No wait helps, so
-- reset and Retry-After are one window.
local function zero_limit(i)
  local denied = hits[i] > 0
  return 0, 0, windows[i], denied and windows[i] or 0, denied and 1 or 0
end

-- Mode 0 checks and charges key by key; modes 1 and 2 first look at every key without
-- charging, and mode 1 then charges all of them only when none was denied.
local function run(charge)
  local out, any_denied = {}, false
  for i = 1, n do
    local used, remaining, reset_ms, retry_ms, denied
    if limits[i] == 0 then
      used, remaining, reset_ms, retry_ms, denied = zero_limit(i)
    else
      used, remaining, reset_ms, retry_ms, denied = step(i, charge)
    end
    local at = 5 * i - 4
    out[at], out[at + 1], out[at + 2], out[at + 3], out[at + 4] = used, remaining, reset_ms, retry_ms, denied
    if denied == 1 then any_denied = true end
  end
  return out, any_denied
end

if mode == 0 then
  return (run(true))
end
local looked, any_denied = run(false)
if mode == 1 and not any_denied then
  return (run(true))
end
return looked
