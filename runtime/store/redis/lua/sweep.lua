-- SWEEP: delete the consumers of the task groups that workers which died (SIGKILL, OOM)
-- left behind: a stopping worker's consumer leaves by itself (give_back.lua), a dead
-- one's stays listed in every partition's group for ever, one more per crash, once the
-- reclaim took over its tasks. All the streams of a single Redis in one call (one per
-- call on a cluster), run rarely by any worker (two at once: the second finds nothing).
-- Race closed: a consumer listed with nothing pending and idle, then delivered (or
-- claimed) an entry before its deletion: XGROUP DELCONSUMER drops the consumer's pending
-- entries with it, so that entry would never be reclaimed and its run would wait for ever.
-- Here the listing, the check (nothing pending, idle longer than the threshold) and the
-- deletion are one script: no read or claim runs between them. A consumer deleted this
-- way that reads again is created again by its read.
-- The caller's own consumer is never deleted. Redis lists a group's consumers only whole
-- (XINFO CONSUMERS has no cursor): that costs O(consumers), few once swept; the
-- deletions are bounded per stream and call.
-- 'idle' (ms since the consumer's last read or claim) is in XINFO CONSUMERS from Redis
-- 7.0 on; 7.2 adds 'inactive', not needed here.
-- KEYS: the task streams. ARGV: the calling consumer, idle ms, deletions per stream.
-- Returns {consumers deleted, 1 if a stream may hold more to delete, else 0}.
local caller, idle, limit = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local deleted, more = 0, 0
for i = 1, #KEYS do
  local here = 0
  for _, fields in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[i], GROUP)) do
    local consumer = {}
    for f = 1, #fields, 2 do consumer[fields[f]] = fields[f + 1] end
    if consumer.name ~= caller and consumer.pending == 0 and consumer.idle > idle then
      if here == limit then
        more = 1
        break
      end
      redis.call('XGROUP', 'DELCONSUMER', KEYS[i], GROUP, consumer.name)
      here = here + 1
    end
  end
  deleted = deleted + here
end
return {deleted, more}
