-- RESTART: a new run that continues an old one from a chosen step: the old run's input and
-- the events before that step copied into the new run's log, the two runs linked, the new
-- one enqueued.
-- Race closed: a crash between creating the new run and linking or enqueueing it (a run no
-- worker picks up, or one nobody can find from the old run): one step. Both runs are in
-- one partition (the new id is chosen so), so this is one slot on a cluster too.
-- KEYS: the new run's hash (see run_keys), then the old run's hash.
-- ARGV: new run id, workflow, session ('' for none), now ms, old run id, the copied events
--       as JSON [[type, data], ...].
--       and only when the old run was tagged, its tags as a JSON object (the new run
--       gets them, indexed in this same step).
-- Returns 1 (created) or 0 (a run of that id exists; nothing changed).
local keys = run_keys()
local run_id, workflow, session, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local old_key = KEYS[2]
local old_id = ARGV[5]
local events = cjson.decode(ARGV[6])
if not create_run(keys.prefix, run_id, workflow, now, session, ARGV[7], 'restarted_from',
    old_id) then
  return 0
end
for _, event in ipairs(events) do
  append_event(keys.run, keys.events, event[1], event[2])
end
if redis.call('EXISTS', old_key) == 1 then
  redis.call('HSET', old_key, 'restarted_as', run_id)
end
return 1
