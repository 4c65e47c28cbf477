-- lib/args.lua: reading a call's ARGV, shared by every script.
-- Provides
--   whole(i, min)             ARGV[i] as a whole number >= min that a double holds exactly, else nil
--   int(v)                    v as a '%d' string, the way numbers go to redis
--   read_call(script, per_key)
--                             checks ARGV against KEYS for the layout
--                               [mode, (hits, limit, window[, burst]) × n, optional pinned now]
--                             with per_key = 3 (no burst) or 4, and returns call, nil:
--                               call.n, call.mode (0, 1 or 2), call.now (epoch ms; the pinned
--                               last ARGV, else redis TIME, read here once), and per key i
--                               call.hits[i], call.limits[i], call.windows[i] (in ms),
--                               call.bursts[i] (per_key 4 only);
--                             or nil, an error reply "ERR <script>: ..." to return as is.

-- A whole number >= min that a double holds exactly; nil otherwise (also for nan and inf).
local function whole(i, min)
  local v = tonumber(ARGV[i])
  if v ~= nil and v >= min and v < 9007199254740992 and v == math.floor(v) then
    return v
  end
  return nil
end

-- Numbers go to redis as '%d' strings: redis versions differ in how they print Lua doubles.
local function int(v)
  return string.format('%d', v)
end

local function read_call(script, per_key)
  local n = #KEYS
  local nargs = #ARGV
  if nargs ~= per_key * n + 1 and nargs ~= per_key * n + 2 then
    return nil, redis.error_reply(string.format(
      'ERR %s: %d keys need %d or %d ARGV, got %d', script, n, per_key * n + 1, per_key * n + 2, nargs))
  end

  local mode = whole(1, 0)
  if mode ~= 0 and mode ~= 1 and mode ~= 2 then
    return nil, redis.error_reply('ERR ' .. script .. ': mode (ARGV[1]) must be 0, 1 or 2')
  end

  local now
  if nargs == per_key * n + 2 then
    now = whole(nargs, 0)
    if now == nil then
      return nil, redis.error_reply('ERR ' .. script .. ': pinned now (last ARGV) must be epoch milliseconds')
    end
  else
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end

  local needs = 'hits >= 0, limit >= 0, window >= 1'
  if per_key == 4 then needs = needs .. ', burst >= 0' end
  local call = { n = n, mode = mode, now = now, hits = {}, limits = {}, windows = {}, bursts = {} }
  for i = 1, n do
    local first = per_key * (i - 1) + 2
    local h, l, w, b = whole(first, 0), whole(first + 1, 0), whole(first + 2, 1), 0
    if per_key == 4 then b = whole(first + 3, 0) end
    if h == nil or l == nil or w == nil or b == nil then
      return nil, redis.error_reply(string.format(
        'ERR %s: key %d needs integer %s (ARGV[%d..%d])', script, i, needs, first, first + per_key - 1))
    end
    call.hits[i], call.limits[i], call.windows[i] = h, l, w * 1000
    if per_key == 4 then call.bursts[i] = b end
  end
  return call, nil
end
