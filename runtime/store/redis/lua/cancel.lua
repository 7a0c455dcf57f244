-- CANCEL: end a run that has not finished.
-- Races closed: cancel vs. a running execution (the fence moves, so the worker's next
-- write is refused and it stops); cancel vs. an answer or a deadline (hooks close here, so
-- a later answer is rejected and a later deadline does nothing).
-- ARGV: run id, now ms, retention seconds, prefix, workflow.cancelled event data,
--       status message for the session.
-- Returns {'cancelled'} | {'no_run'} | {'finished', status}.
local keys = run_keys()
local run_id, now, ttl, prefix = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local event, message = ARGV[5], ARGV[6]

local rs = redis.call('HMGET', keys.run, 'status', 'msg', 'session', 'tags')
local status, msg, session = rs[1], rs[2], rs[3]
if not status then return {'no_run'} end
if FINISHED[status] then return {'finished', status} end
redis.call('HINCRBY', keys.run, 'fence', 1)
redis.call('HSET', keys.run, 'status', STATUS.cancelled, 'ended', now)
if status == STATUS.suspended or status == STATUS.blocked or status == STATUS.parked then
  redis.call('HINCRBY', keys.stats, status, -1)
end
if status == STATUS.parked then
  redis.call('SREM', key_parked(prefix, redis.call('HGET', keys.run, 'ver')), run_id)
end
redis.call('HINCRBY', keys.stats, STATUS.cancelled, 1)
redis.call('HDEL', keys.run, 'owner', 'lease', 'msg')
if msg then ack_task(keys.tasks, msg) end
append_event(keys.run, keys.events, EVENT.workflow_cancelled, event)
if session and session ~= '' then post(key_outbox(prefix, session), message) end
end_run(prefix, run_id, keys, session, ttl, rs[4], now)
return {'cancelled'}
