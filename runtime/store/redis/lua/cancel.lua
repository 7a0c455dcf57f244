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

local ended = {}
local function cancel_run(id, run_keys_of)
  local rs = redis.call('HMGET', run_keys_of.run, 'status', 'msg', 'session', 'ver', 'tags')
  local status, msg, session = rs[1], rs[2], rs[3]
  if not status or FINISHED[status] then return end
  redis.call('HINCRBY', run_keys_of.run, 'fence', 1)
  redis.call('HSET', run_keys_of.run, 'status', STATUS.cancelled, 'ended', now)
  if status == STATUS.suspended or status == STATUS.blocked or status == STATUS.parked then
    redis.call('HINCRBY', run_keys_of.stats, status, -1)
  end
  if status == STATUS.parked then redis.call('SREM', key_parked(prefix, rs[4]), id) end
  redis.call('HINCRBY', run_keys_of.stats, STATUS.cancelled, 1)
  redis.call('HDEL', run_keys_of.run, 'owner', 'lease', 'msg')
  if msg then ack_task(run_keys_of.tasks, msg) end
  append_event(run_keys_of.run, run_keys_of.events, EVENT.workflow_cancelled, event)
  if session and session ~= '' then post(prefix, session, message, ttl) end
  child_ended(prefix, run_keys_of.run,
    cjson.encode({child_run_id = id, status = STATUS.cancelled}))
  end_run(prefix, id, run_keys_of, session, ttl, rs[5], now)
  ended[#ended + 1] = id
  for _, child in ipairs(redis.call('SMEMBERS', key_children(prefix, id))) do
    cancel_run(child, {
      run = key_run(prefix, child), events = key_events(prefix, child),
      ckpt = key_ckpt(prefix, child), hooks = key_hooks(prefix, child),
      tasks = run_keys_of.tasks, deadlines = run_keys_of.deadlines,
      pending = run_keys_of.pending, stats = run_keys_of.stats})
  end
end

local status = redis.call('HGET', keys.run, 'status')
if not status then return {'no_run'} end
if FINISHED[status] then return {'finished', status} end
cancel_run(run_id, keys)
return {'cancelled', ended}
