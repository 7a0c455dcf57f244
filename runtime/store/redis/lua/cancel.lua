-- CANCEL: end a run that has not finished, and the runs it started (child()), in one step.
-- Races closed: cancel vs. a running execution (the fence moves, so the worker's next
-- write is refused and it stops); cancel vs. an answer or a deadline (hooks close here, so
-- a later answer is rejected and a later deadline does nothing); a child that ends while
-- its parent is cancelled (both here: one step).
-- ARGV: run id, now ms, retention seconds, prefix, workflow.cancelled event data,
--       status message for the session.
-- Returns {'cancelled', ids of the runs it ended (for the caller to compact them)}
--       | {'no_run'} | {'finished', status}.
local keys = run_keys()
local run_id, now, ttl, prefix = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local event, message = ARGV[5], ARGV[6]

local status = redis.call('HGET', keys.run, 'status')
if not status then return {'no_run'} end
if FINISHED[status] then return {'finished', status} end
local ended = {}
cancel_run(prefix, run_id, keys, now, ttl, event, message, ended)
return {'cancelled', ended}
