-- SEND: a message to a run. If the run waits for a message of this topic, it goes to the
-- run's log (and wakes it); else it waits in the run's inbox until a receive takes it.
-- Races closed: a send vs. the suspension of a receive (the suspension takes what the
-- inbox holds in the same step as it sets the run waiting, and this step checks the flag
-- that suspension set): a message is received once, never lost; a send vs. the end of
-- the run (status checked here).
-- KEYS: the run's hash (see run_keys), then its inbox.
-- ARGV: run id, topic, message event data ({"topic", "payload"}).
-- Returns {'delivered'} | {'buffered'} | {'no_run'} | {'finished', status}.
local keys = run_keys()
local inbox = KEYS[2]
local run_id, topic, data = ARGV[1], ARGV[2], ARGV[3]
local rs = redis.call('HMGET', keys.run, 'status', 'wf', 'recv:' .. topic)
local status = rs[1]
if not status then return {'no_run'} end
if FINISHED[status] then return {'finished', status} end
if not rs[3] then
  redis.call('XADD', inbox, '*', 't', topic, 'd', data)
  return {'buffered'}
end
redis.call('HDEL', keys.run, 'recv:' .. topic)
append_event(keys.run, keys.events, EVENT.message_received, data)
if status == STATUS.suspended then
  redis.call('HSET', keys.run, 'status', STATUS.pending)
  redis.call('HINCRBY', keys.stats, STATUS.suspended, -1)
  enqueue(keys.tasks, run_id, rs[2])
end
return {'delivered'}
