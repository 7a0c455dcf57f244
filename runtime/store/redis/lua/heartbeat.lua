-- HEARTBEAT: extend the lease of a long execution and reset its task's idle time, so the
-- reclaim of dead workers' tasks does not hand a live worker's run to another worker.
-- Race closed: a heartbeat from a worker that already lost the run (the fence moved) must
-- not extend the new owner's lease.
-- The lease's end is on Redis' clock as the store reads it (see CLAIM), not the worker's.
-- ARGV: fence, lease until ms, consumer. Returns 1 (extended) or 0 (lost).
local keys = run_keys()
local fence, until_ms, consumer = ARGV[1], ARGV[2], ARGV[3]
if redis.call('HGET', keys.run, 'fence') ~= fence then return 0 end
redis.call('HSET', keys.run, 'lease', until_ms)
local msg = redis.call('HGET', keys.run, 'msg')
if msg then redis.call('XCLAIM', keys.tasks, GROUP, consumer, 0, msg, 'JUSTID') end
return 1
