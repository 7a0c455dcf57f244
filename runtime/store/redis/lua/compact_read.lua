-- COMPACT_READ: ended runs' logs and hooks as they are, for the worker to pack into archives
-- (Lua has no zlib; lua/compact.lua swaps them in): one call per partition for a chunk of
-- runs instead of an XRANGE and an HGETALL per run, two of the commands a lifecycle costs.
-- Not atomic with the swap, and need not be: compact.lua's fence (the run ended, its log's
-- length, its hooks' count) refuses a run that changed in between.
-- KEYS: per run (all in one partition): its events, its hooks.
-- Returns, per run, {its log's entries, its hooks hash as a flat list}.
local out = {}
for r = 0, #KEYS / 2 - 1 do
  out[r + 1] = {redis.call('XRANGE', KEYS[2 * r + 1], '-', '+'),
    redis.call('HGETALL', KEYS[2 * r + 2])}
end
return out
