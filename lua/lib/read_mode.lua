-- lib/read_mode.lua: a call's mode, ARGV[1], by name, as src/limiter/redis/call-mode.ts sends
-- it (CALL_PASSES, NAMED): 'count', 'stop' or 'look', with ':named' after it when the call
-- names its counters in ARGV (a Redis Cluster node's merged call: KEYS[1] only routes it, and
-- each counter's name comes first of its ARGV) instead of declaring them in KEYS. A name the
-- script does not take is refused before anything is read or written.
-- Provides
--   read_mode(script, takes) -> pass, named; or nil and an error reply `ERR <script>: mode
--     (ARGV[1]) must be ..., got '...'`. takes: the names the script takes, in the order the
--     error lists them; pass: 'count', 'stop' or 'look'; named: true after ':named'.

local function read_mode(script, takes)
  local text = ARGV[1]
  for i = 1, #takes do
    if takes[i] == text then
      local at = string.find(text, ':named', 1, true)
      if at == nil then return text, false end
      return string.sub(text, 1, at - 1), true
    end
  end
  local names = "'" .. table.concat(takes, "', '") .. "'"
  return nil, redis.error_reply(string.format("ERR %s: mode (ARGV[1]) must be one of %s, got '%s'", script, names, tostring(text)))
end
