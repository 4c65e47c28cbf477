-- lib/read_call.lua: the one call protocol of every script in lua/.
-- Provides
--   read_call(script) -> call, nil; or nil, an error reply "ERR <script>: ..." to return as is.
-- (lua/fixed_window.lua has a leaner protocol of its own, with named counters for merged calls.)
-- Needs lib/read_mode.lua first.
--
-- KEYS[i]     counter i (i = 1..n); all keys of one call share a hash slot. A key may appear
--             more than once in a call (see lib/run_call.lua for how that is judged).
-- ARGV[1]     the mode, by name (lib/read_mode.lua): count, stop or look (lib/run_call.lua says
--             what each does).
-- ARGV[4i-2]  hits_i: integer >= 0 for KEYS[i]; 0 = peek (never creates or changes the key).
-- ARGV[4i-1]  limit_i: integer >= 0, requests per window.
-- ARGV[4i]    window_i: window length in whole seconds (>= 1).
-- ARGV[4i+1]  burst_i: integer >= 0, token_bucket's and gcra's capacity; the others ignore it.
-- ARGV[4n+2]  optional, tests only: "now" in epoch milliseconds. Without it the clock is
--             redis TIME, read here once per call.
--
-- call.n, call.mode ('count', 'stop' or 'look'), call.now (epoch ms), and per key i call.hits[i], call.limits[i],
-- call.windows[i] (in ms), call.bursts[i]. Every number is a whole number that a double holds
-- exactly; rules are bounded at load so that every product the scripts form stays below 2^53.

local function read_call(script)
  -- Locals: a global or a field is a table lookup on every use, and this runs for 4 ARGV a key.
  local argv, tonumber, floor = ARGV, tonumber, math.floor
  -- A whole number >= min that a double holds exactly; nil otherwise (also for nan and inf).
  local function whole(i, min)
    local v = tonumber(argv[i])
    if v ~= nil and v >= min and v < 9007199254740992 and v == floor(v) then
      return v
    end
    return nil
  end

  local mode, wrong = read_mode(script, { 'count', 'stop', 'look' })
  if mode == nil then return nil, wrong end
  local nargs = #ARGV
  local n = #KEYS
  if nargs ~= 4 * n + 1 and nargs ~= 4 * n + 2 then
    return nil, redis.error_reply(string.format(
      'ERR %s: %d keys need %d or %d ARGV, got %d', script, n, 4 * n + 1, 4 * n + 2, nargs))
  end
  local now
  if nargs == 4 * n + 2 then
    now = whole(nargs, 0)
    if now == nil then
      return nil, redis.error_reply('ERR ' .. script .. ': pinned now (last ARGV) must be epoch milliseconds')
    end
  else
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  local hits, limits, windows, bursts = {}, {}, {}, {}
  local call = { n = n, mode = mode, now = now, keys = KEYS, hits = hits, limits = limits, windows = windows, bursts = bursts }
  for i = 1, n do
    local first = 4 * i - 2
    local h, l, w, b = tonumber(argv[first]), tonumber(argv[first + 1]), tonumber(argv[first + 2]), tonumber(argv[first + 3])
    -- whole(), inline: the common case costs no function call.
    if not (h and l and w and b and h >= 0 and l >= 0 and w >= 1 and b >= 0
        and h < 9007199254740992 and l < 9007199254740992 and w < 9007199254740992 and b < 9007199254740992
        and h == floor(h) and l == floor(l) and w == floor(w) and b == floor(b)) then
      return nil, redis.error_reply(string.format(
        'ERR %s: key %d needs integer hits >= 0, limit >= 0, window >= 1, burst >= 0 (ARGV[%d..%d])',
        script, i, first, first + 3))
    end
    hits[i], limits[i], windows[i], bursts[i] = h, l, w * 1000, b
  end
  return call, nil
end
