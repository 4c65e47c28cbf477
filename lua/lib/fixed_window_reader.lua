-- lib/fixed_window_reader.lua: reads fixed-window counters' ARGV into a script's tables, for
-- lua/fixed_window.lua and lua/fixed_window_list.lua (needs lib/fixed_window_args.lua first).
-- Provides
--   fixed_window_reader(hits, hit_texts, limits, windows) -> read(i, at): reads counter i's three
--     ARGV from ARGV[at] into the four tables (hits, hits as written, limit, window in ms) and
--     returns nil, or what is wrong with them (lib/read_lists.lua's read_key).

local function fixed_window_reader(hits, hit_texts, limits, windows)
  return function(i, at)
    local h_text = ARGV[at]
    local h, l, w = fixed_window_args(h_text, ARGV[at + 1], ARGV[at + 2])
    if h == nil then
      return string.format('key %d needs integer hits >= 0, limit >= 0, window >= 1 (ARGV[%d..%d])', i, at, at + 2)
    end
    hits[i], hit_texts[i], limits[i], windows[i] = h, h_text, l, w
  end
end
