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

-- @include lib/args.lua

local call, err = read_call('fixed_window', 3)
if err then return err end
local n, mode, now, hits, limits = call.n, call.mode, call.now, call.hits, call.limits
local ends = {}
for i = 1, n do
  local window_ms = call.windows[i]
  ends[i] = now - (now % window_ms) + window_ms
end

local function add(i)
  local key = KEYS[i]
  local count = redis.call('INCRBY', key, int(hits[i]))
  -- A new key gets its expiry here; an old one without expiry (written by someone else) is healed.
  if count == hits[i] or redis.call('PTTL', key) < 0 then
    redis.call('PEXPIREAT', key, int(ends[i]))
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
