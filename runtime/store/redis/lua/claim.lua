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
-- Race closed too: a worker whose remembered log is stale (another worker advanced the
-- run since, or its history was rewritten) replaying from it: the log it knows (its last
-- event id, how many events up to there, the history generation 'gen') is checked against
-- the run in this same step; only when the log still extends it are just the events after
-- it returned, else the whole log (and the worker forgets what it knew).
-- ARGV: now ms, task message id, the last event id the worker knows ('' for none), how many
--       events up to it, the generation it knew; then what a worker sends unchanged on
--       every claim (packed once, runtime/store/redis/_batch.py's Packed): consumer, lease
--       ms, this worker's version, the versions it serves.
-- Returns {'skipped', status} | {'busy'} | {'parked', version}
--       | {'ok', fence, workflow, session, events, ckpts, parent run id or '',
--          'tail' | 'full', event count, generation, '1' if this claim recorded the
--          run's version (its first) else '0'}.
local keys = run_keys()
local now, msg = tonumber(ARGV[1]), ARGV[2]
local known_id, known_count, known_gen = ARGV[3], tonumber(ARGV[4]), ARGV[5]
local consumer, lease_ms, own_version = ARGV[6], tonumber(ARGV[7]), ARGV[8]
local prefix, run_id = keys.prefix, keys.run_id

local rs = redis.call('HMGET', keys.run, 'status', 'lease', 'wf', 'session', 'owner', 'ver',
  'parent', 'nev', 'gen', 'fence')
local status = rs[1]
if (not status) or status == STATUS.suspended or status == STATUS.blocked
    or status == STATUS.parked or FINISHED[status] then
  ack_task(keys.tasks, msg)
  return {'skipped', status or 'missing'}
end
local version = rs[6]
if version then
  local served = false
  for i = 9, #ARGV do
    if ARGV[i] == version then served = true end
  end
  if not served then
    ack_task(keys.tasks, msg)
    redis.call('HSET', keys.run, 'status', STATUS.parked)
    redis.call('HDEL', keys.run, 'msg', 'lease', 'owner')
    redis.call('HINCRBY', keys.stats, STATUS.parked, '1')
    redis.call('SADD', key_parked(prefix, version), run_id)
    return {'parked', version}
  end
end
-- A live lease of another worker: busy. The same worker may take its own run back (its
-- previous execution of it was abandoned; a worker never runs one run twice at once).
if status == STATUS.running and tonumber(rs[2] or '0') > now and rs[5] ~= consumer then
  return {'busy'}
end
-- Numbers go to Redis as strings formatted once as integers: a Lua number given to
-- redis.call is formatted with snprintf("%.17g") on every call. ('%d' is a C long, 32 bits
-- on Windows, where the embedded store may run: a time in ms takes '%.0f'.)
local fence = string.format('%d', tonumber(rs[10] or '0') + 1)
local fields = {'status', STATUS.running, 'owner', consumer,
  'lease', string.format('%.0f', now + lease_ms), 'msg', msg, 'fence', fence}
if not version then  -- the run's first claim: its version is this worker's from now on
  fields[#fields + 1] = 'ver'
  fields[#fields + 1] = own_version
end
redis.call('HSET', keys.run, unpack(fields))
local count, gen = tonumber(rs[8] or '0'), rs[9] or '0'
local mode, events = 'full', nil
if known_id ~= '' and known_gen == gen then
  -- the log extends what the worker knows when its last known event is still there and
  -- the events after it are all the log has beyond the count it knew (one read: from that
  -- event on)
  local from = redis.call('XRANGE', keys.events, known_id, '+')
  if from[1] and from[1][1] == known_id and count == known_count + #from - 1 then
    table.remove(from, 1)
    mode, events = 'tail', from
  end
end
if not events then events = redis.call('XRANGE', keys.events, '-', '+') end
return {'ok', fence, rs[3], rs[4] or '', events, redis.call('HGETALL', keys.ckpt),
  rs[7] or '', mode, rs[8] or '0', gen, version and '0' or '1'}
