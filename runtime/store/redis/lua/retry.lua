-- RETRY: send a blocked run back to the workers (after code that matches its log was
-- deployed). Race closed: a retry vs. a cancel or a second retry: the status is checked
-- and changed in one step, so the run is enqueued once, and only while blocked.
-- ARGV: run id, workflow.retried event data.
-- Returns {'retried'} | {'no_run'} | {'not_blocked', status}.
local keys = run_keys()
local run_id, event = ARGV[1], ARGV[2]
local rs = redis.call('HMGET', keys.run, 'status', 'wf')
local status = rs[1]
if not status then return {'no_run'} end
if status ~= STATUS.blocked then return {'not_blocked', status} end
redis.call('HSET', keys.run, 'status', STATUS.pending)
redis.call('HDEL', keys.run, 'blocked')
redis.call('HINCRBY', keys.stats, STATUS.blocked, -1)
append_event(keys.run, keys.events, EVENT.workflow_retried, event)
enqueue(keys.tasks, run_id, rs[2])
return {'retried'}
