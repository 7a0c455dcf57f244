-- READ_HOOKS: the hooks hashes of ended runs about to be compacted (lua/compact.lua), one
-- partition's in one call instead of one HGETALL each: the compactor reads their logs with
-- one XREAD of all their streams, and this is the one other read. Writes nothing, so it
-- closes no race; the swap's fence (the hooks' count) finds a hash that changed after it.
-- KEYS: the runs' hooks hashes (all in one partition). Returns each one's HGETALL, in order.
local out = {}
for i = 1, #KEYS do
  out[i] = redis.call('HGETALL', KEYS[i])
end
return out
