-- lib/not_served_here.lua: the errors of a counter a Redis Cluster node will not count in a call
-- that names its counters in ARGV (a ':named' mode, lib/read_mode.lua, of lua/fixed_window.lua,
-- lua/fixed_window_list.lua, lua/limit_list.lua and lua/stop_request.lua).
-- Provides
--   not_served_here(err) -> true when `err` (an error reply's text, or nil) says the key's slot
--     is not this node's (it moved, or is moving), or that the server refuses a script keys of
--     several slots (Redis does for scripts with flags; a managed Redis may for all). Redis 7
--     says "non local key" and "same slot"; a cluster's multi-key refusal says CROSSSLOT.

local function not_served_here(err)
  local text = err or ''
  return string.find(text, 'non local key', 1, true) ~= nil
    or string.find(text, 'same slot', 1, true) ~= nil
    or string.find(text, 'CROSSSLOT', 1, true) ~= nil
end
