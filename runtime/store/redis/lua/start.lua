-- START: create a run: its hash, its first event and its task in one step.
-- Race closed: a crash between writing the run and enqueueing it would leave a run no
-- worker ever picks up.
-- (With tags, the run enters the tag index in the same step: a run listed by a tag before
-- it exists, or created without its tags listed, cannot be seen.)
-- ARGV: run id, workflow, session ('' for none), now ms, workflow.started event data,
--       and only for a tagged run its tags as a JSON object.
-- Returns 1 (created) or 0 (a run of that id exists; nothing changed).
local keys = run_keys()
local run_id, workflow, session, now, event = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
if not create_run(keys.prefix, run_id, workflow, now, session, ARGV[6]) then return 0 end
append_event(keys.run, keys.events, EVENT.workflow_started, event)
return 1
