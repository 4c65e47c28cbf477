-- lib/fixed_window_step.lua: the fixed window's state and step, shared by lua/fixed_window.lua and
-- lua/limit_list.lua so that a counter means the same to both (needs lib/int.lua first).
-- Provides
--   fixed_window_step(key, value, now, w, h, limit, charge) -> used, remaining, reset_ms,
--     retry_after_ms, denied, blocked_ms: with `value` the key's value as GET read it (nil: no
--     key), judges `h` hits at `now` in windows of `w` ms against `limit`, and when `charge`
--     writes the count (one SET, KEEPTTL or PXAT); see lua/fixed_window.lua for the layout and
--     the answers.

local fw_match, fw_max, fw_rcall = string.match, math.max, redis.call

local function fixed_window_step(key, value, now, w, h, limit, charge)
  local start = now - (now % w)
  -- "<s>:<c>:<p>", read as numbers and as the stored text of s and p (reused by a write that
  -- keeps them); a plain integer (an older floodgate's key) is the count of the current window.
  local stored, c, p, vs, vp = nil, 0, 0, nil, nil
  if value then
    local vc
    vs, vc, vp = fw_match(value, '^(%d+):(%d+):(%d+)$')
    if vs ~= nil then
      stored, c, p = tonumber(vs), tonumber(vc), tonumber(vp)
    elseif fw_match(value, '^%d+$') then
      stored, c = start, tonumber(value)
    end
  end
  -- Past its expiry the state is gone, whether or not redis has removed the key yet.
  if stored ~= nil and stored + 2 * w <= now then stored, c, p, vs = nil, 0, 0, nil end
  local count = 0
  if stored == start then
    count = c
  elseif stored == start + w then
    count = p
  end
  local denied = count + h > limit
  if charge and h > 0 then
    count = count + h
    -- One SET per write. A value in the "s:c:p" form got its expiry, s + 2W, with the SET that
    -- started window s, so a write that keeps s keeps the TTL (KEEPTTL: no expiry to format
    -- and store again), and the common case, a later hit in window s, reuses the stored start
    -- and previous count as they are. A new window, or a plain integer, sets it (PXAT).
    if stored == start and vs ~= nil then
      fw_rcall('SET', key, vs .. ':' .. int(count) .. ':' .. vp, 'KEEPTTL')
    elseif stored == start + w then
      fw_rcall('SET', key, vs .. ':' .. int(c) .. ':' .. int(count), 'KEEPTTL')
    elseif stored == nil or stored <= start then
      local before = 0
      if stored == start then before = p elseif stored == start - w then before = c end
      fw_rcall('SET', key, int(start) .. ':' .. int(count) .. ':' .. int(before), 'PXAT', int(start + 2 * w))
    end
  end
  local reset_ms = start + w - now
  local retry_ms, blocked_ms = 0, 0
  if denied then retry_ms = reset_ms end
  if count >= limit then blocked_ms = reset_ms end
  return count, fw_max(0, limit - count), reset_ms, retry_ms, denied and 1 or 0, blocked_ms
end
