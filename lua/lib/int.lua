-- lib/int.lua: numbers on their way to redis.
-- Provides
--   int(v) -> v as a '%d' string: redis versions differ in how they print Lua doubles. Every
--     value passed is a whole number below 2^53 (the rule-load bounds keep it there), so '%d'
--     never sees a value it would wrap.

local function int(v)
  return string.format('%d', v)
end
