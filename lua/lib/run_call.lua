-- lib/run_call.lua: the modes of the call protocol and its one reply shape.
-- Provides
--   run_call(call, step) -> the script's reply.
--
-- `call` comes from lib/read_call.lua. `step(i, pending, charge)` is the script's algorithm for
-- key i and returns six integers:
--   used, remaining, reset_ms   the key's state after this step (charged when `charge` is true
--                               and the step charges), as the algorithm reports it
--   retry_ms, denied            the judgement of hits_i on top of `pending` hits that earlier
--                               occurrences of the same key in this call would add
--   blocked_ms                  how long from now the state after this step denies every
--                               request with hits >= 1, whatever its size; 0 when not certain
-- The algorithms here charge only admitted hits (lua/fixed_window.lua, which counts every hit
-- like the reference, has a protocol of its own); a key with limit 0 never reaches `step`: every
-- hit is denied, a peek allowed, nothing read or written, and reset, Retry-After and blocked are
-- one window.
--
-- Modes (ARGV[1], by name: lib/read_mode.lua):
--   count    each key in turn is judged and charged (a repeated key sees the earlier charge).
--   look     each key is judged, nothing is charged; a repeated key is judged with the hits of
--            its earlier admitted occurrences pending.
--   stop     STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: look first; when no key is denied, count;
--            else charge nothing (a denied hit is never charged here) and answer the look.
--
-- Returns     a flat array of 6n integers; key i fills positions 6i-5 .. 6i:
--             used_i, remaining_i, reset_ms_i, retry_after_ms_i (0 when allowed), denied_i (1
--             or 0), blocked_ms_i.

local function run_call(call, step)
  local out = {}
  local function judge(i, pending, charge)
    local u, r, reset, retry, denied, blocked
    if call.limits[i] == 0 then
      local w = call.windows[i]
      denied = call.hits[i] > 0 and 1 or 0
      u, r, reset, retry, blocked = 0, 0, w, denied * w, w
    else
      u, r, reset, retry, denied, blocked = step(i, pending, charge)
    end
    local at = 6 * i - 5
    out[at], out[at + 1], out[at + 2], out[at + 3], out[at + 4], out[at + 5] = u, r, reset, retry, denied, blocked
    return denied == 1
  end

  if call.mode == 'count' then
    for i = 1, call.n do judge(i, 0, true) end
    return out
  end
  local pending, any_denied = {}, false
  for i = 1, call.n do
    local key = call.keys[i]
    if judge(i, pending[key] or 0, false) then
      any_denied = true
    else
      pending[key] = (pending[key] or 0) + call.hits[i]
    end
  end
  if call.mode == 'stop' and not any_denied then
    for i = 1, call.n do judge(i, 0, true) end
  end
  return out
end
