-- policy: one decision of a domain's adaptive policy for one client (src/policy/policy-model.ts
-- is the same model in TypeScript; both pass one trace suite).
--
-- KEYS[1]     the client's state: a hash {tier, calm, until, win, req, rep, den, exp}.
-- KEYS[2]     the set of distinct route hashes seen in the current window (at most ARGV[12]).
-- KEYS[3]     the set of fingerprint hashes seen in the current window (at most ARGV[13]).
--             All three share the client's hash tag. Every key written gets its expiry here:
--             the sets at the window's end, the state one quiet period after the tier is back
--             to normal (so the next decision still sees the steps down), and not before the
--             window's end.
-- ARGV[1]     mode: 0 = decide (count this request), 1 = look up (write nothing).
-- ARGV[2]     window: length of the signals' window in ms (>= 1), aligned to the Unix epoch.
-- ARGV[3..6]  weights (>= 0) of the signals: requests, repeats, distinct routes, denials.
-- ARGV[7..9]  thresholds (>= 1, rising): the score that reaches elevated, suspicious, blocked.
-- ARGV[10]    blocked: how long the penalty box lasts, in ms (>= 1).
-- ARGV[11]    quiet: ms without behaving at the tier after which the client goes down one (>= 1).
-- ARGV[12]    route cap: distinct routes remembered per window (0 = no route signal).
-- ARGV[13]    fingerprint cap: fingerprints remembered per window (0 = no repeat signal).
-- ARGV[14]    route hash of this request (>= 1), or 0 for none.
-- ARGV[15]    fingerprint hash of this request (>= 1), or 0 for none.
-- ARGV[16]    denials the client received since its previous decision (>= 0).
-- ARGV[17]    optional, tests only: "now" in epoch milliseconds. Without it the clock is
--             redis TIME, read once per call.
--
-- Returns     9 integers: tier (0 normal, 1 elevated, 2 suspicious, 3 blocked) after this call,
--             the tier stored before it, ms left in the penalty box (0 unless blocked), the
--             window's requests, repeats, distinct routes, denials and score, and the tier after
--             the steps time alone makes (box over, quiet periods) before this request counts.
-- Errors      "ERR policy: ..." when ARGV does not fit or a number is invalid.

-- @include lib/int.lua

-- Not lib/read_call.lua: that is the counters' ARGV layout, and it reads the clock itself.
local function whole(i, min)
  local v = tonumber(ARGV[i])
  if v ~= nil and v >= min and v < 9007199254740992 and v == math.floor(v) then
    return v
  end
  return nil
end

if #KEYS ~= 3 then return redis.error_reply('ERR policy: needs 3 keys, got ' .. #KEYS) end
if #ARGV ~= 16 and #ARGV ~= 17 then return redis.error_reply('ERR policy: needs 16 or 17 ARGV, got ' .. #ARGV) end
local a = {}
for i = 1, 16 do
  a[i] = whole(i, 0)
  if a[i] == nil then return redis.error_reply('ERR policy: ARGV[' .. i .. '] must be an integer >= 0') end
end
local mode, window, w_req, w_rep, w_route, w_den = a[1], a[2], a[3], a[4], a[5], a[6]
local at_elevated, at_suspicious, at_blocked, blocked_ms, quiet_ms = a[7], a[8], a[9], a[10], a[11]
local route_cap, print_cap, route, print, denials = a[12], a[13], a[14], a[15], a[16]
if mode > 1 or window < 1 or blocked_ms < 1 or quiet_ms < 1 or at_elevated < 1 then
  return redis.error_reply('ERR policy: mode must be 0 or 1; window, blocked, quiet and thresholds >= 1')
end

local now
if #ARGV == 17 then
  now = whole(17, 0)
  if now == nil then return redis.error_reply('ERR policy: pinned now (last ARGV) must be epoch milliseconds') end
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local state_key, routes_key, prints_key = KEYS[1], KEYS[2], KEYS[3]
local f = redis.call('HMGET', state_key, 'tier', 'calm', 'until', 'win', 'req', 'rep', 'den', 'exp')
-- Without a state there are no sets either (they never outlive it): nothing to clear.
local had_state = f[1] ~= false
-- The state's own expiry, also read here so that a pinned clock sees it expire as Redis would.
if f[8] and now >= tonumber(f[8]) then
  f = {}
end
local tier = tonumber(f[1]) or 0
local calm = tonumber(f[2]) or now
local till = tonumber(f[3]) or 0
local win = tonumber(f[4]) or -1
local req, rep, den = tonumber(f[5]) or 0, tonumber(f[6]) or 0, tonumber(f[7]) or 0
local previous = tier

if tier == 3 and now >= till then
  tier, calm = 2, till
end
if tier > 0 and tier < 3 and now - calm >= quiet_ms then
  local steps = math.floor((now - calm) / quiet_ms)
  tier = math.max(0, tier - steps)
  calm = calm + steps * quiet_ms
end

local settled = tier

local window_start = now - (now % window)
local fresh_window = win ~= window_start
local routes = 0
if fresh_window then
  req, rep, den = 0, 0, 0
elseif route_cap > 0 then
  routes = redis.call('SCARD', routes_key)
end
local counting = mode == 0 and tier < 3
if counting then
  if fresh_window and had_state then
    -- The sets belong to the previous window.
    redis.call('DEL', routes_key, prints_key)
  end
  win = window_start
  req = req + 1
  den = den + denials
  local window_end = window_start + window
  -- A set gets its expiry when this script creates it (and only this script writes it).
  if route > 0 and route_cap > 0 and routes < route_cap then
    local added = redis.call('SADD', routes_key, ARGV[14])
    if added == 1 and routes == 0 then redis.call('PEXPIREAT', routes_key, int(window_end)) end
    routes = routes + added
  end
  if print > 0 and print_cap > 0 then
    if redis.call('SISMEMBER', prints_key, ARGV[15]) == 1 then
      rep = rep + 1
    else
      local known = redis.call('SCARD', prints_key)
      if known < print_cap then
        redis.call('SADD', prints_key, ARGV[15])
        if known == 0 then redis.call('PEXPIREAT', prints_key, int(window_end)) end
      end
    end
  end
end

local score = w_req * req + w_rep * rep + w_route * routes + w_den * den
if counting then
  local target = 0
  if score >= at_blocked then target = 3 elseif score >= at_suspicious then target = 2 elseif score >= at_elevated then target = 1 end
  if target > tier then
    tier, calm = tier + 1, now
    if tier == 3 then till = now + blocked_ms end
  elseif target == tier then
    calm = now
  end
end

if mode == 0 then
  -- A blocked call writes too: the drop out of the box and the quiet steps are stored.
  if fresh_window and not counting then
    -- Nothing counted in this window yet: keep the old window's numbers out of the new one.
    if had_state then redis.call('DEL', routes_key, prints_key) end
    win = window_start
  end
  -- One quiet period past the return to normal: a decision then still sees the steps down.
  local expires = win + window
  if tier == 3 then
    expires = math.max(expires, till + 3 * quiet_ms)
  elseif tier > 0 then
    expires = math.max(expires, calm + (tier + 1) * quiet_ms)
  end
  redis.call('HSET', state_key, 'tier', tier, 'calm', int(calm), 'until', int(till), 'win', int(win), 'req', req, 'rep', rep, 'den', den, 'exp', int(expires))
  redis.call('PEXPIREAT', state_key, int(expires))
end

local left = 0
if tier == 3 then left = till - now end
return { tier, previous, left, req, rep, routes, den, score, settled }
