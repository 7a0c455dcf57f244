-- START: create a run: its hash, its first event and its task in one step.
-- Race closed: a crash between writing the run and enqueueing it would leave a run no
-- worker ever picks up.
-- (With tags, the run enters the tag index in the same step: a run listed by a tag before
-- it exists, or created without its tags listed, cannot be seen.)
-- (With a message, the message is posted to the run's session in the same step, before
-- anything the run posts. Race closed: posted by a call of its own before the start, a
-- visitor's chat message stayed shown without its run when Redis went away in between,
-- and the page's retry, finding no run for its message, posted it again.)
-- ARGV: run id, workflow, session ('' for none), now ms, workflow.started event data,
--       its tags as a JSON object ('' for an untagged run), and only with a message for
--       the session the message and the session's retention in seconds.
-- Returns 1 (created) or 0 (a run of that id exists; nothing changed, nothing posted).
local keys = run_keys()
local run_id, workflow, session, now, event = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local tags = ARGV[6] ~= '' and ARGV[6] or nil
if not create_run(keys.prefix, run_id, workflow, now, session, tags) then return 0 end
if ARGV[7] then post(keys.prefix, session, ARGV[7], tonumber(ARGV[8])) end
append_event(keys.run, keys.events, EVENT.workflow_started, event)
return 1
