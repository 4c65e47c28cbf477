-- sliding_window: epoch-aligned windows whose estimate carries a decaying share of the
-- previous window: estimate = prev × (1 − elapsed / W) + curr. Only admitted hits count.
-- Protocol: lib/read_call.lua (KEYS, ARGV), lib/run_call.lua (modes, Returns).
--
-- KEYS[i]     counter i: a hash {s = start of the latest window written (epoch ms), c = admitted
--             hits in it, p = admitted hits in the window before}. A call whose window is s
--             reads (c, p); s + W (next window) reads (0, c); s − W (the clock stepped back one
--             window) reads (p, 0) and charges p; any other window reads (0, 0), and a charge
--             more than one window behind s is not kept. The key expires when window s + W
--             ends, when its state no longer matters.
-- ARGV[...]   as lib/read_call.lua.
-- Returns     as lib/run_call.lua, per key: used = ceil(estimate); remaining =
--             max(0, limit − used); reset_ms = until every kept window with hits has decayed
--             (window start + 2 W); retry_after_ms = until estimate + pending + hits <= limit
--             without more hits, in this window while prev decays, else in the next one
--             (hits > limit: max(1, reset_ms)); blocked_ms = that wait for a 1-hit request.
--             Compared scaled by W in integers: prev × (W − elapsed) + (curr + hits) × W <= limit × W.

-- @include lib/int.lua
-- @include lib/read_call.lua
-- @include lib/run_call.lua

local call, err = read_call('sliding_window')
if err then return err end
local now = call.now

-- First ms from now at which `hits` more fit on top of curr, prev without more hits.
local function wait_for(limit, w, elapsed, curr, prev, hits)
  if curr + hits <= limit and prev * (w - elapsed) + (curr + hits) * w <= limit * w then return 0 end
  local room = limit - curr - hits
  if room >= 0 and prev > 0 then
    -- The first whole ms e of this window with prev × (W − e) <= room × W.
    local e = w - math.floor((room * w) / prev)
    if e < w then return e - elapsed end
  end
  -- In the next window curr becomes prev: first e with curr × (W − e) <= (limit − hits) × W.
  local e = 0
  if curr > 0 then e = math.max(0, w - math.floor(((limit - hits) * w) / curr)) end
  return w + e - elapsed
end

local function step(i, pending, charge)
  local key, h, limit, w = KEYS[i], call.hits[i], call.limits[i], call.windows[i]
  local start = now - (now % w)
  local elapsed = now - start
  local s = redis.call('HMGET', key, 's', 'c', 'p')
  local stored, c, p = tonumber(s[1]), tonumber(s[2]) or 0, tonumber(s[3]) or 0
  -- Past its expiry the state is gone, whether or not redis has removed the key yet.
  if stored ~= nil and stored + 2 * w <= now then stored, c, p = nil, 0, 0 end
  local curr, prev = 0, 0
  if stored == start then
    curr, prev = c, p
  elseif stored == start + w then
    curr = p
  elseif stored == start - w then
    prev = c
  end
  local allowed = h <= limit and wait_for(limit, w, elapsed, curr + pending, prev, h) == 0
  if allowed and charge and h > 0 then
    curr = curr + h
    if stored == start + w then
      p = curr
      redis.call('HSET', key, 'p', int(p))
    elseif stored == nil or stored <= start then
      stored, c, p = start, curr, prev
      redis.call('HSET', key, 's', int(start), 'c', int(curr), 'p', int(prev))
      redis.call('PEXPIREAT', key, int(start + 2 * w))
    end
  end
  local used = math.ceil((prev * (w - elapsed) + curr * w) / w)
  -- Fully reset when the last kept window with hits has decayed, two windows after it starts.
  local reset_ms = 0
  if stored ~= nil then
    if c > 0 then reset_ms = math.max(reset_ms, stored + 2 * w - now) end
    if p > 0 then reset_ms = math.max(reset_ms, stored + w - now) end
  end
  local blocked_ms = wait_for(limit, w, elapsed, curr, prev, 1)
  if allowed then
    return used, math.max(0, limit - used), reset_ms, 0, 0, blocked_ms
  end
  local retry_ms
  if h > limit then
    retry_ms = math.max(1, reset_ms)
  else
    retry_ms = wait_for(limit, w, elapsed, curr + pending, prev, h)
  end
  return used, math.max(0, limit - used), reset_ms, retry_ms, 1, blocked_ms
end

return run_call(call, step, false)
