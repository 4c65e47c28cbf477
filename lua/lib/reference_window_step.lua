-- lib/reference_window_step.lua: a fixed window counted in the reference's own key
-- (REDIS_KEY_LAYOUT=reference, issue 30), shared by lua/reference_window.lua and
-- lua/stop_request.lua, so that floodgate and envoyproxy/ratelimit pods count together.
--
-- Layout: the reference's (src/limiter/cache_key.go; src/limiter/reference-key.ts):
-- `CACHE_KEY_PREFIX + domain + "_" + (key + "_" + value + "_")* + window start (epoch s)`, no hash
-- tag, holding the window's count as a plain integer. A hit is INCRBY by the hits and EXPIRE by
-- the unit's seconds (plus the jitter the caller drew, as the reference adds up to
-- EXPIRATION_JITTER_MAX_SECONDS), on every hit, as the reference's pipeline does: the key lives at
-- least as long as a reference pod would keep it.
--
-- The window is the one the key names, as the caller's clock placed the call: the reference names
-- it from its own clock, and a key derived here from Redis TIME could lie in another slot (the key
-- has no hash tag), which a Redis Cluster refuses. Redis TIME still measures the reset: the time
-- until the named window ends, within 1 ms .. one window (a caller's clock a little ahead or
-- behind Redis' at an edge counts in the window it named, and answers a reset of that window).
--
-- Provides
--   reference_window_step(key, now, w, h, h_text, e_text) -> count, reset_ms: the count of
--     window key `key` (window `w` ms) after `h` more hits (0: as it stands, nothing written),
--     and the ms until the window it names ends by `now`. `h_text`: h as ARGV wrote it (plain
--     digits, for INCRBY); `e_text`: the expiry in whole seconds, as ARGV wrote it.

local rw_match, rw_rcall, rw_tonumber = string.match, redis.call, tonumber

local function reference_window_step(key, now, w, h, h_text, e_text)
  local start = rw_tonumber(rw_match(key, '_(%d+)$'))
  local reset_ms = start and start * 1000 + w - now or w - now % w
  if reset_ms < 1 then reset_ms = 1 elseif reset_ms > w then reset_ms = w end
  if h > 0 then
    local count = rw_rcall('INCRBY', key, h_text)
    rw_rcall('EXPIRE', key, e_text)
    return count, reset_ms
  end
  return rw_tonumber(rw_rcall('GET', key)) or 0, reset_ms
end
