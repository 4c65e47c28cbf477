-- lib/window_calls.lua: the call loop of the lean fixed-window protocol, shared by
-- lua/fixed_window.lua (floodgate's keys) and lua/reference_window.lua (the reference's keys), so
-- that both answer every mode alike and differ only in their storage step (needs
-- lib/not_served_here.lua first).
--
-- Provides
--   window_calls(step, mode, named, n, hits, limits, ends) -> out: `step(i, h)` counts counter
--     i after `h` more hits (0: as it stands) and returns its count and reset; `out` holds
--     count, reset per counter. `count` charges each counter its hits, `look` charges none, `stop`
--     decides each unit (a request's counters, ending at `ends[u]`) on its own, in order: when any
--     counter of the unit would go over, only those over are charged (the reference's STOP rule).
--     Named (a cluster node's merged call), counters first..last (one counter, or a stop unit,
--     whose counters share a slot) are answered count -1 when their slot is not this node's:
--     their first command fails, before anything of them is written (Redis 7 raises a table,
--     Redis 6 its text).

local function window_calls(step, mode, named, n, hits, limits, ends)
  local out = {}
  local function tally(i, h)
    local count, reset_ms = step(i, h)
    out[2 * i - 1], out[2 * i] = count, reset_ms
    return count
  end
  local function served(run, first, last)
    local ok, err = pcall(run, first, last)
    if not ok then
      if not not_served_here(type(err) == 'table' and err.err or tostring(err)) then error(err) end
      for i = first, last do out[2 * i - 1], out[2 * i] = -1, 0 end
    end
  end
  if mode ~= 'stop' then
    local charge = mode == 'count'
    if not named then
      for i = 1, n do tally(i, charge and hits[i] or 0) end
    else
      local function tally_own(i) tally(i, charge and hits[i] or 0) end
      for i = 1, n do served(tally_own, i, i) end
    end
    return out
  end
  local over = {}
  local function stop_unit(first, last)
    local any_over = false
    for i = first, last do
      over[i] = tally(i, 0) + hits[i] > limits[i]
      if over[i] then any_over = true end
    end
    for i = first, last do tally(i, (over[i] or not any_over) and hits[i] or 0) end
  end
  local first = 1
  for u = 1, #ends do
    local last = ends[u]
    if named then served(stop_unit, first, last) else stop_unit(first, last) end
    first = last + 1
  end
  return out
end
