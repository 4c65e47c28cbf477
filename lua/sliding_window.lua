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

local n = #KEYS
local nargs = #ARGV
if nargs ~= 4 * n + 1 and nargs ~= 4 * n + 2 then
  return redis.error_reply(string.format(
    'ERR sliding_window: %d keys need %d or %d ARGV, got %d', n, 4 * n + 1, 4 * n + 2, nargs))
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
  return redis.error_reply('ERR sliding_window: mode (ARGV[1]) must be 0, 1 or 2')
end

local now
if nargs == 4 * n + 2 then
  now = whole(nargs, 0)
  if now == nil then
    return redis.error_reply('ERR sliding_window: pinned now (last ARGV) must be epoch milliseconds')
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
      'ERR sliding_window: key %d needs integer hits >= 0, limit >= 0, window >= 1, burst >= 0 (ARGV[%d..%d])',
      i, 4 * i - 2, 4 * i + 1))
  end
  hits[i], limits[i], windows[i], bursts[i] = h, l, w * 1000, b
end

-- Numbers go to redis as '%d' strings: redis versions differ in how they print Lua doubles.
local function int(v)
  return string.format('%d', v)
end

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
