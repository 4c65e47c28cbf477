-- lib/bucket.lua: the decision over a bucket's debt, shared by token_bucket.lua and gcra.lua.
-- Provides
--   decide(call, i, debt, charge, store) -> used, remaining, reset_ms, retry_ms, denied
--     for key i of a call from lib/args.lua (hits, limits, bursts, windows), given the bucket's
--     debt (capacity − tokens, in tokens × W). The two scripts differ in what they store, never
--     in what they answer. `store(debt, ttl_ms)` writes the charged state; it is called only when
--     the hits are admitted and `charge` is true.
-- Exact while burst × W stays below 2^53 (a day window: burst up to about 10^8).

local function decide(call, i, debt, charge, store)
  local h, limit, burst, w = call.hits[i], call.limits[i], call.bursts[i], call.windows[i]
  local capacity = burst * w
  local need = h * w
  local allowed = debt + need <= capacity
  if allowed and charge and h > 0 then
    debt = debt + need
    store(debt, math.ceil(debt / limit))
  end
  local remaining = math.max(0, math.floor((capacity - debt) / w))
  local reset_ms = math.ceil(debt / limit)
  if allowed then
    return burst - remaining, remaining, reset_ms, 0, 0
  end
  local retry_ms
  if h > burst then
    retry_ms = math.max(1, reset_ms)
  else
    retry_ms = math.ceil((debt + need - capacity) / limit)
  end
  return burst - remaining, remaining, reset_ms, retry_ms, 1
end
