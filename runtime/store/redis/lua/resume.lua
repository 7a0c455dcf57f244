-- RESUME: deliver an answer to a hook.
-- Races closed:
--  - answer vs. deadline: both check the hook is still pending inside one script, so
--    exactly one of hook.received / hook.expired is recorded;
--  - answer vs. suspension: the run is enqueued only if already suspended; if it is still
--    executing, the worker's suspension (APPLY) sees this event and continues instead;
--  - duplicate answers: the first one flips the hook to received and keeps the answer's
--    digest; a later one with the same digest is a duplicate, any other a conflict.
-- ARGV: run id, hook id, token, payload digest, validated ('1' | '0'), max events,
--       prefix, hook.received event data, announcement message for the session, retention
--       seconds (the session outbox's expiry).
-- KEYS: the run's hash (see run_keys).
-- Returns {outcome} | {'finished', status} | {'needs_validation', hook record}
--       | {'archived', status, segment id or ''} (the run ended and was compacted: the
--       caller decides).
local keys = run_keys()
local run_id, hook_id, token, digest = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local validated, max_events, prefix = ARGV[5] == '1', tonumber(ARGV[6]), ARGV[7]
local event, announcement, ttl = ARGV[8], ARGV[9], tonumber(ARGV[10])

local record = redis.call('HGET', keys.hooks, hook_id)
if not record then
  local status = redis.call('HGET', keys.run, 'status')
  if not status then return {'no_run'} end
  -- an ended run, compacted (lua/compact.lua): its hooks are in its segment (or, compacted
  -- before segments, its own archive), which only the caller can read (zlib); nothing is
  -- to be written to an ended run
  local segment = redis.call('HGET', keys.run, 'archive')
  if FINISHED[status] and (segment
      or redis.call('EXISTS', key_archive(keys.prefix, keys.run_id)) == 1) then
    return {'archived', status, segment or ''}
  end
  return {'no_hook'}
end
local state = hook_state(record)
if state == HOOK_RECEIVED then
  if redis.call('HGET', keys.hooks, hook_id .. DIGEST_SUFFIX) == digest then
    return {'duplicate'}
  end
  return {'conflict'}
end
if state == HOOK_EXPIRED then return {'expired'} end
if state == HOOK_CLOSED then return {'closed'} end
local rs = redis.call('HMGET', keys.run, 'status', 'nev', 'session', 'wf')
local status = rs[1]
-- a run that ended closed its pending hooks: say how it ended, not just "closed"
if FINISHED[status] and status ~= STATUS.cancelled then return {'finished', status} end
if state == HOOK_CANCELLED then return {'cancelled'} end
if FINISHED[status] then return {'finished', status} end
if string.sub(record, 2, 2) == 'S' and not validated then return {'needs_validation', record} end
if tonumber(rs[2] or '0') >= max_events then return {'limit'} end

redis.call('HSET', keys.hooks, hook_id, with_hook_state(record, HOOK_RECEIVED),
  hook_id .. DIGEST_SUFFIX, digest)
append_event(keys.run, keys.events, EVENT.hook_received, event)
redis.call('SREM', keys.pending, token)
redis.call('ZREM', keys.deadlines, deadline_member(run_id, 'h', hook_id))
local session = rs[3]
if session and session ~= '' then
  unwait(key_waiting(prefix), session, 1)
  -- every page of the session learns the prompt was answered, in the same atomic step
  post(prefix, session, announcement, ttl)
end
settle_first(prefix, run_id, keys.hooks, keys.pending, keys.deadlines, session, hook_id, ttl)
if status == STATUS.suspended then
  redis.call('HSET', keys.run, 'status', STATUS.pending)
  redis.call('HINCRBY', keys.stats, STATUS.suspended, '-1')
  enqueue(keys.tasks, run_id, rs[4])
end
return {'recorded'}
