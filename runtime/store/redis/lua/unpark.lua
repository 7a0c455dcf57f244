-- UNPARK: send a partition's runs parked for a version back to the workers, now that a
-- worker serves it. Race closed: a run parked while this runs, or unparked twice by two
-- workers: each member is taken out of the set and re-checked in one step, so a run is
-- enqueued once, and only while still parked.
-- KEYS: the partition's parked set of the version, its tasks stream, its stats.
-- ARGV: partition prefix. Returns the number of runs sent back.
local parked_key, tasks_key, stats_key = KEYS[1], KEYS[2], KEYS[3]
local prefix = ARGV[1]
local sent = 0
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
return sent
