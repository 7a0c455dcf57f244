-- UNPARK: send the runs parked for a version back to the workers, now that a worker serves
-- it, in one or more partitions (all of a single Redis in one call; one per call on a
-- cluster). Race closed: a run parked while this runs, or unparked twice by two workers:
-- each member is taken out of the set and re-checked in one step, so a run is enqueued
-- once, and only while still parked.
-- KEYS: for each partition: its parked set of the version, its tasks stream, its stats.
-- ARGV: the prefix of each partition. Returns the number of runs sent back.
local sent = 0
for i = 1, #KEYS / 3 do
  local parked_key, tasks_key, stats_key = KEYS[i * 3 - 2], KEYS[i * 3 - 1], KEYS[i * 3]
  local prefix = ARGV[i]
  for _, run_id in ipairs(redis.call('SMEMBERS', parked_key)) do
    local run_key = key_run(prefix, run_id)
    local rs = redis.call('HMGET', run_key, 'status', 'wf')
    if rs[1] == STATUS.parked then
      redis.call('HSET', run_key, 'status', STATUS.pending)
      redis.call('HINCRBY', stats_key, STATUS.parked, -1)
      enqueue(tasks_key, run_id, rs[2])
      sent = sent + 1
    end
  end
  redis.call('DEL', parked_key)
end
return sent
