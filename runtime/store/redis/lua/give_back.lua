-- GIVE_BACK: a worker that stops gives back every task it read and did not finish (read
-- just as it stopped, waiting in its backlog or behind an execution of the same run, or
-- left pending by an execution that could not end): each becomes a new message that any
-- consumer reads at once, instead of waiting in this consumer's pending list until the
-- visibility timeout (the run's later tasks are not queued meanwhile: it has one already).
-- Race closed: another worker's reclaim taking an entry between this worker's read of its
-- pending list and its acknowledgement, so that the run would be queued twice.
-- Once a stream holds nothing more of the consumer's, the consumer leaves its group: a
-- worker's consumer name is its own (one per process), so the stopped worker's would stay
-- listed for ever, one more after every deploy. (A read delivered after this recreates it.)
-- KEYS: the task streams. ARGV: consumer, count (per stream).
-- Returns {tasks given back, 1 if a stream may hold more of this consumer's, else 0}.
local consumer, count = ARGV[1], tonumber(ARGV[2])
local given, more = 0, 0
for i = 1, #KEYS do
  local pending = redis.call('XPENDING', KEYS[i], GROUP, '-', '+', count, consumer)
  if #pending == count then more = 1 end
  for _, entry in ipairs(pending) do
    local id = entry[1]
    local found = redis.call('XRANGE', KEYS[i], id, id)
    if #found == 1 and #found[1][2] > 0 then  -- (an entry deleted while pending: nothing)
      redis.call('XADD', KEYS[i], '*', unpack(found[1][2]))
      given = given + 1
    end
    ack_task(KEYS[i], id)
  end
  if #pending < count then  -- (all given back and acknowledged: nothing of it is lost)
    redis.call('XGROUP', 'DELCONSUMER', KEYS[i], GROUP, consumer)
  end
end
return {given, more}
