-- POST: a message to a session's outbox (emit() from a step, post_to_session), trimmed,
-- and the outbox's expiry refreshed unless one of the session's prompts is pending.
-- Race closed: a prompt recorded (APPLY: its message, `waiting` + 1, PERSIST) between
-- reading `waiting` and setting the expiry would leave a pending prompt's outbox expiring;
-- here the read and the EXPIRE are one step.
-- KEYS: the session's outbox, the partition's `waiting` hash.
-- ARGV: partition prefix, session id, message, retention seconds.
-- Returns the new entry's id.
return post(ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]))
