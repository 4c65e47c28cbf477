-- lib/fixed_window_step.lua: the fixed window's storage, shared by lua/fixed_window.lua,
-- lua/fixed_window_list.lua and lua/limit_list.lua so that a counter means the same to all three
-- (needs lib/int.lua first).
--
-- Layout (issue 20): one key per counter and window, "<counter>:<window start, epoch s>", holding
-- the window's count as a plain integer, as the reference keeps one key per window. A hit is one
-- INCRBY; the window's first hit also sets the key's expiry, PEXPIREAT at the end of the window
-- after it (the reference's per-window keys live one window past their window too), so a clock
-- that steps back across an edge still finds the count it left there. A call at time T always
-- counts in the key of the window that holds T: the window is in the name, so a key that Redis
-- has not expired yet is never taken for a later window's. The window's key appends to the
-- counter's name, after its hash tag: it lives in the counter's slot.
--
-- The caller declares the window's key, as its own clock places the call (KEYS, or a named
-- call's names): in a Redis Cluster a slot being migrated is served where its declared keys are,
-- so the key that holds the count must be the declared one (declaring the counter's name, which
-- holds nothing, sent every call of a migrating slot to the importing node, which counted
-- afresh and then refused the migration of the real key, BUSYKEY). Redis' TIME still decides:
-- when it places the call in another window (clock skew, or a call at an edge), the step counts
-- in that window's key, derived from the declared one.
--
-- An older floodgate kept the counter in "<counter>" itself, as "<s>:<c>:<p>" (s the start of the
-- latest window counted in, epoch ms, c its count, p the count of the window before) or, older
-- still, a plain integer (the current window's count). For windows longer than a minute, a
-- window with no key yet starts from what that value holds for it, so a rolling upgrade keeps the
-- counts the old pods made up to then (a plain integer, which names no window, is removed once
-- taken): a day's quota is not granted twice. A window of a minute or less starts afresh, as at
-- a switch from the reference: its first hits are the most frequent (a per-second counter's
-- every hit may be one), and one GET more on each would cost more than one extra window's worth
-- of hits at an upgrade.
--
-- Provides
--   fixed_window_step(declared, now, w, h, h_text, defer) -> count, reset_ms, key, expire_at: the
--     count of the counter whose window key the caller declared (`<counter>:<start s>`) in the
--     window of `w` ms that holds `now`, after `h` more hits (h = 0: as it stands, nothing
--     written), the ms until that window ends (>= 1), and the window's key. `h_text`: h as the
--     call's ARGV wrote it (a whole number), passed to INCRBY as it is: a Lua number would be
--     printed as a double. With `defer`, the expiry of a window's first hit is left to the
--     caller, who may still take the hit back (a list's tentative charge): expire_at is then the
--     PEXPIREAT it needs (epoch ms), nil when the key already had its expiry.

local fw_format, fw_match, fw_sub, fw_rcall, fw_tonumber = string.format, string.match, string.sub, redis.call, tonumber
-- ":<window start, epoch s>" per window length, for this call's `now` (a script's top-level
-- locals live for one call): formatted once, not once a key.
local fw_suffixes = {}

local function fixed_window_step(declared, now, w, h, h_text, defer)
  local start = now - now % w
  local suffix = fw_suffixes[w]
  if suffix == nil then
    suffix = fw_format(':%d', start / 1000)
    fw_suffixes[w] = suffix
  end
  local key = declared
  if fw_sub(declared, -#suffix) ~= suffix then key = (fw_match(declared, '^(.*):%d+$') or declared) .. suffix end
  local count
  if h > 0 then
    count = fw_rcall('INCRBY', key, h_text)
    -- Not the window's first hit here (a count of 0 is never stored): the common case.
    if count ~= h then return count, start + w - now, key end
  else
    count = fw_rcall('GET', key)
    if count then return fw_tonumber(count), start + w - now, key end
  end
  -- The window has no count here before this call: for a window longer than a minute, an older
  -- floodgate's value may hold one, the count of s = start, the previous count when s = start +
  -- w (the clock stepped back one window), none past its expiry (s + 2w).
  -- (A value of another type there is not an older floodgate's: redis.pcall, and nothing taken.)
  local before, plain, base = 0, false, nil
  local value = nil
  if w > 60000 then
    base = fw_match(key, '^(.*):%d+$')
    value = redis.pcall('GET', base)
    if type(value) ~= 'string' then value = nil end
  end
  if value then
    local vs, vc, vp = fw_match(value, '^(%d+):(%d+):(%d+)$')
    if vs == nil then
      -- A plain integer names no window: taken once, for this one, and removed when charged.
      before = fw_tonumber(fw_match(value, '^%d+$')) or 0
      plain = before > 0
    else
      local s = fw_tonumber(vs)
      if s + 2 * w > now then
        if s == start then before = fw_tonumber(vc) elseif s == start + w then before = fw_tonumber(vp) end
      end
    end
  end
  if h == 0 then return before, start + w - now, key end
  if before > 0 then count = fw_rcall('INCRBY', key, before) end
  if plain then fw_rcall('DEL', base) end
  if defer then return count, start + w - now, key, start + 2 * w end
  fw_rcall('PEXPIREAT', key, int(start + 2 * w))
  return count, start + w - now, key
end
