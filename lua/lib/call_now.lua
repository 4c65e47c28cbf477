-- lib/call_now.lua: a call's clock, read once.
-- Provides
--   call_now(pinned) -> epoch ms: Redis TIME, or `pinned` (an ARGV, tests only) when given; nil
--     when `pinned` is not whole epoch milliseconds.

local function call_now(pinned)
  if pinned ~= nil then
    local now = tonumber(pinned)
    if now and now >= 0 and now < 9007199254740992 and now == math.floor(now) then return now end
    return nil
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
