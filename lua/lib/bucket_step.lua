-- lib/bucket_step.lua: the decision over a bucket's debt, shared by token_bucket.lua and gcra.lua.
-- Provides
--   bucket_step(call, i, debt, at, pending, charge, store) -> the six integers of a step
--     (lib/run_call.lua) for key i, given what was used: `debt` = tokens taken × W (ms), as it
--     stood at epoch ms `at`. The debt drains by limit per ms. A counter's clock never goes
--     back: the state is evaluated at max(now, at), so a clock that steps back neither refills
--     nor refills twice, and times are reported from now. `store(debt, at, expire_at)` writes the
--     charged state; it is called only when the hits are admitted and `charge` is true. The two
--     scripts differ in how they store, never in what they answer.
-- Exact while burst × W and limit × W stay below 2^53: enforced when rules load.

local function bucket_step(call, i, debt, at, pending, charge, store)
  local h, limit, burst, w, now = call.hits[i], call.limits[i], call.bursts[i], call.windows[i], call.now
  local tau = math.max(now, at)
  local ahead = tau - now
  -- Drained by limit × elapsed, at most to 0 (the time is capped so the product stays small).
  debt = debt - math.min(debt, limit * math.min(tau - at, math.ceil(debt / limit)))
  local capacity = burst * w
  local wanted = pending + h
  local fits = wanted <= burst and debt + wanted * w <= capacity
  if fits and charge and h > 0 then
    debt = debt + h * w
    store(debt, tau, tau + math.ceil(debt / limit))
  end
  local remaining = math.max(0, math.floor((capacity - debt) / w))
  local reset_ms = 0
  if debt > 0 then reset_ms = ahead + math.ceil(debt / limit) end
  local blocked_ms = 0
  if burst < 1 then
    blocked_ms = math.max(1, reset_ms)
  elseif debt + w > capacity then
    blocked_ms = ahead + math.ceil((debt + w - capacity) / limit)
  end
  if fits then
    return burst - remaining, remaining, reset_ms, 0, 0, blocked_ms
  end
  local retry_ms
  if wanted > burst then
    -- More than the capacity never fits: come back when the bucket is full.
    retry_ms = math.max(1, reset_ms)
  else
    retry_ms = ahead + math.ceil((debt + wanted * w - capacity) / limit)
  end
  return burst - remaining, remaining, reset_ms, retry_ms, 1, blocked_ms
end
