-- CLAIM: take a run's lease for one execution and load everything replay needs in the same
-- round trip.
-- Race closed: two workers handed the same run (a reclaimed task whose first consumer is
-- merely slow, or a duplicate task): only one gets a live lease, and the fence increments
-- on every takeover so the loser's later writes are refused.
-- Race closed too: a worker of another version replaying a run its code did not start:
-- the run's version is recorded at its first claim, and a worker that does not serve it
-- parks the run (acknowledging the task) in the same step, instead of executing it.
-- Race closed too: a worker whose clock is ahead taking a live lease as expired: `now` is
-- Redis' clock as the store reads it (runtime/store/redis/_time.py), never the worker's.
-- ARGV: consumer, now ms, lease ms, task message id, this worker's version, prefix, run id,
--       then the versions it serves.
-- Returns {'skipped', status} | {'busy'} | {'parked', version}
--       | {'ok', fence, workflow, session, events, ckpts, parent run id or ''}.
local keys = run_keys()
local consumer, now, lease_ms, msg = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local own_version, prefix, run_id = ARGV[5], ARGV[6], ARGV[7]

local rs = redis.call('HMGET', keys.run, 'status', 'lease', 'wf', 'session', 'owner', 'ver',
  'parent')
local status = rs[1]
if (not status) or status == STATUS.suspended or status == STATUS.blocked
    or status == STATUS.parked or FINISHED[status] then
  ack_task(keys.tasks, msg)
  return {'skipped', status or 'missing'}
end
local version = rs[6]
if version then
  local served = false
  for i = 8, #ARGV do
    if ARGV[i] == version then served = true end
  end
  if not served then
    ack_task(keys.tasks, msg)
    redis.call('HSET', keys.run, 'status', STATUS.parked)
    redis.call('HDEL', keys.run, 'msg', 'lease', 'owner')
    redis.call('HINCRBY', keys.stats, STATUS.parked, 1)
    redis.call('SADD', key_parked(prefix, version), run_id)
    return {'parked', version}
  end
else
  redis.call('HSET', keys.run, 'ver', own_version)
end
-- A live lease of another worker: busy. The same worker may take its own run back (its
-- previous execution of it was abandoned; a worker never runs one run twice at once).
if status == STATUS.running and tonumber(rs[2] or '0') > now and rs[5] ~= consumer then
  return {'busy'}
end
local fence = redis.call('HINCRBY', keys.run, 'fence', 1)
redis.call('HSET', keys.run, 'status', STATUS.running, 'owner', consumer, 'lease', now + lease_ms,
  'msg', msg)
return {'ok', tostring(fence), rs[3], rs[4] or '',
  redis.call('XRANGE', keys.events, '-', '+'), redis.call('HGETALL', keys.ckpt), rs[7] or ''}
