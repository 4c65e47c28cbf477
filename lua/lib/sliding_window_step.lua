-- lib/sliding_window_step.lua: the sliding window's step, shared by lua/sliding_window.lua and
-- lua/limit_list.lua so that a counter means the same to both (needs lib/int.lua first).
-- Provides
--   sliding_window_step(key, now, w, h, limit, pending, charge) -> used, remaining, reset_ms,
--     retry_after_ms, denied, blocked_ms: judges `h` hits at `now` in windows of `w` ms against
--     `limit`, on top of `pending` hits that earlier occurrences of the key in the call would
--     add (0 in a list, which holds a counter once), reading the hash at `key` (one HMGET);
--     when the hits are admitted and `charge` is true, writes them (HSET, and PEXPIREAT when a
--     window starts). See lua/sliding_window.lua for the layout and the answers.

local function sliding_window_step(key, now, w, h, limit, pending, charge)
  -- First ms from now at which `hits` more fit on top of curr, prev without more hits.
  local function wait_for(elapsed, curr, prev, hits)
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
  local allowed = h <= limit and wait_for(elapsed, curr + pending, prev, h) == 0
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
  local blocked_ms = wait_for(elapsed, curr, prev, 1)
  if allowed then
    return used, math.max(0, limit - used), reset_ms, 0, 0, blocked_ms
  end
  local retry_ms
  if h > limit then
    retry_ms = math.max(1, reset_ms)
  else
    retry_ms = wait_for(elapsed, curr + pending, prev, h)
  end
  return used, math.max(0, limit - used), reset_ms, retry_ms, 1, blocked_ms
end
