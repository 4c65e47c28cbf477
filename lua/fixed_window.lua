-- fixed_window: epoch-aligned fixed-window counters. One call checks n counters of one hash slot.
--
-- KEYS[i]     counter i (i = 1..n): an integer string that expires at the end of its window.
--             All keys of one call share a hash slot. The expiry is always set by this script.
-- ARGV[1]     mode: 0 = count every hit, also over the limit (envoyproxy/ratelimit's default);
--             1 = STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: if any key would go over its limit
--                 (count + hits > limit), no key of this call is incremented;
--             2 = as 1, except that the first key that would go over is still incremented
--                 (what envoyproxy/ratelimit does with that setting).
-- ARGV[3i-1]  hits_i: integer >= 0 added to KEYS[i]; 0 = peek (read only, never creates the key).
-- ARGV[3i]    limit_i: integer >= 0; KEYS[i] is over when its count exceeds limit_i.
-- ARGV[3i+1]  window_i: window length in whole seconds (>= 1); windows start at multiples of
--             it counted from the Unix epoch, and the key expires when its window ends.
-- ARGV[3n+2]  optional, tests only: "now" in epoch milliseconds. Without it the clock is
--             redis TIME, read once per call.
--
-- Returns     a flat array of 4n integers; counter i fills positions 4i-3 .. 4i:
--             count_i      the value of KEYS[i] after this call (0 when the key does not exist)
--             remaining_i  max(0, limit_i - count_i)
--             reset_ms_i   milliseconds from now until the window ends (the key's expiry), >= 1
--             over_i       1 when this call is over the limit of KEYS[i], else 0:
--                          count_i > limit_i when the hits were added, and
--                          count_i + hits_i > limit_i when they were not (peek, or held back)
-- Errors      "ERR fixed_window: ..." when ARGV does not fit KEYS or a number is invalid.

local n = #KEYS
local nargs = #ARGV
if nargs ~= 3 * n + 1 and nargs ~= 3 * n + 2 then
  return redis.error_reply(string.format(
    'ERR fixed_window: %d keys need %d or %d ARGV, got %d', n, 3 * n + 1, 3 * n + 2, nargs))
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
  return redis.error_reply('ERR fixed_window: mode (ARGV[1]) must be 0, 1 or 2')
end

local now
if nargs == 3 * n + 2 then
  now = whole(nargs, 0)
  if now == nil then
    return redis.error_reply('ERR fixed_window: pinned now (last ARGV) must be epoch milliseconds')
  end
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local hits, limits, ends = {}, {}, {}
for i = 1, n do
  local h, l, w = whole(3 * i - 1, 0), whole(3 * i, 0), whole(3 * i + 1, 1)
  if h == nil or l == nil or w == nil then
    return redis.error_reply(string.format(
      'ERR fixed_window: key %d needs integer hits >= 0, limit >= 0, window >= 1 (ARGV[%d..%d])',
      i, 3 * i - 1, 3 * i + 1))
  end
  local window_ms = w * 1000
  hits[i], limits[i], ends[i] = h, l, now - (now % window_ms) + window_ms
end

-- Numbers go to redis as '%d' strings: redis versions differ in how they print Lua doubles.
local function add(i)
  local key = KEYS[i]
  local count = redis.call('INCRBY', key, string.format('%d', hits[i]))
  -- A new key gets its expiry here; an old one without expiry (written by someone else) is healed.
  if count == hits[i] or redis.call('PTTL', key) < 0 then
    redis.call('PEXPIREAT', key, string.format('%d', ends[i]))
  end
  return count
end

local function peek(i)
  return tonumber(redis.call('GET', KEYS[i])) or 0
end

local counts, added = {}, {}
if mode == 0 then
  for i = 1, n do
    if hits[i] > 0 then
      counts[i], added[i] = add(i), true
    else
      counts[i] = peek(i)
    end
  end
else
  local first_over
  for i = 1, n do
    counts[i] = peek(i)
    if first_over == nil and counts[i] + hits[i] > limits[i] then
      first_over = i
    end
  end
  for i = 1, n do
    if hits[i] > 0 and (first_over == nil or (mode == 2 and i == first_over)) then
      counts[i], added[i] = add(i), true
    end
  end
end

local out = {}
for i = 1, n do
  local count, limit = counts[i], limits[i]
  local over = count > limit
  if not added[i] then
    over = count + hits[i] > limit
  end
  local at = 4 * i - 3
  out[at] = count
  out[at + 1] = math.max(0, limit - count)
  out[at + 2] = ends[i] - now
  out[at + 3] = over and 1 or 0
end
return out
