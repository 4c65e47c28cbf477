-- lib/admitted.lua: the modes and the reply of the scripts that count only admitted hits
-- (sliding_window, token_bucket, gcra, sliding_log; the uniform layout of 5 integers per key).
-- Provides
--   answer(call, step) -> the script's reply: a flat array of 5n integers, key i at 5i-4 .. 5i.
--     `call` comes from lib/args.lua. `step(i, charge)` returns used, remaining, reset_ms,
--     retry_ms, denied for key i and charges it when `charge` is true and it is allowed; it is
--     never called for a key with limit 0 (every hit denied, a peek allowed, nothing read or
--     written, reset and Retry-After one window).
--     Mode 0 checks and charges key by key; modes 1 and 2 first look at every key without
--     charging, and mode 1 then charges all of them only when none was denied.
--   run(call, step, charge) -> out, any_denied: one pass over the keys, for answer.

local function run(call, step, charge)
  local out, any_denied = {}, false
  for i = 1, call.n do
    local used, remaining, reset_ms, retry_ms, denied
    if call.limits[i] == 0 then
      -- No wait helps, so reset and Retry-After are one window.
      local w = call.windows[i]
      denied = call.hits[i] > 0 and 1 or 0
      used, remaining, reset_ms, retry_ms = 0, 0, w, denied == 1 and w or 0
    else
      used, remaining, reset_ms, retry_ms, denied = step(i, charge)
    end
    local at = 5 * i - 4
    out[at], out[at + 1], out[at + 2], out[at + 3], out[at + 4] = used, remaining, reset_ms, retry_ms, denied
    if denied == 1 then any_denied = true end
  end
  return out, any_denied
end

local function answer(call, step)
  if call.mode == 0 then
    return (run(call, step, true))
  end
  local looked, any_denied = run(call, step, false)
  if call.mode == 1 and not any_denied then
    return (run(call, step, true))
  end
  return looked
end
