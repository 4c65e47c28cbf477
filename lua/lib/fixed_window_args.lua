-- lib/fixed_window_args.lua: one fixed-window counter's ARGV, as lua/fixed_window.lua and
-- lua/fixed_window_list.lua take them.
-- Provides
--   fixed_window_args(h_text, l_text, w_text) -> h, limit, window_ms; nil when one is not a whole
--     number in range: hits >= 0 written in plain decimal digits (they go to INCRBY as written,
--     lib/fixed_window_step.lua: '1.0', '01' or '1e0' would pass tonumber and then fail INCRBY
--     after the counters before them were charged), limit >= 0, window >= 1 s; all below 2^53.

local fwa_find, fwa_floor, fwa_tonumber = string.find, math.floor, tonumber

local function fixed_window_args(h_text, l_text, w_text)
  local h = (h_text == '0' or fwa_find(h_text, '^[1-9]%d*$')) and fwa_tonumber(h_text)
  local l, w = fwa_tonumber(l_text), fwa_tonumber(w_text)
  if h and l and w and l >= 0 and w >= 1 and h < 9007199254740992 and l < 9007199254740992 and w < 9007199254740992
      and l == fwa_floor(l) and w == fwa_floor(w) then
    return h, l, w * 1000
  end
  return nil
end
