-- FIRE_DUE: fire the due deadlines of one partition.
-- Races closed: two workers firing the same deadline (ZREM inside the script: exactly one
-- pops it); a deadline vs. an answer (expiry only if the hook is still pending); a deadline
-- of a running run (the event is appended, the running worker's suspension sees it and
-- continues).
-- KEYS: deadlines, tasks, pending, stats of the partition.
-- Race closed too: a worker whose clock is ahead expiring hooks early: `now` is Redis'
-- clock as the store reads it (runtime/store/redis/_time.py).
-- ARGV: now ms, limit, partition prefix.
-- Returns {popped, earliest pending score or '', {lateness ms of each fired deadline}}.
local deadlines_key, tasks_key, pending_key, stats_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now, limit, prefix = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]

local due = redis.call('ZRANGEBYSCORE', deadlines_key, '-inf', now, 'LIMIT', 0, limit,
  'WITHSCORES')
local lateness = {}
for j = 1, #due, 2 do
  local member = due[j]
  redis.call('ZREM', deadlines_key, member)
  local first = string.find(member, DEADLINE_SEP, 1, true)
  local run_id = string.sub(member, 1, first - 1)
  local kind = string.sub(member, first + 1, first + 1)
  local id = string.sub(member, first + 3)
  local run_key = key_run(prefix, run_id)
  local rs = redis.call('HMGET', run_key, 'status', 'session', 'wf', 'ask:' .. id)
  local status, session = rs[1], rs[2]
  local wake = false
  if status and not FINISHED[status] then
    if kind == 'h' and rs[4] then
      -- Race closed: its on_created has not returned (the worker may have died after
      -- recording the hook): nobody was asked, so it does not expire now. APPLY's 'asked'
      -- schedules the deadline again once someone was.
    elseif kind == 'h' then
      local hooks_key = key_hooks(prefix, run_id)
      local record = redis.call('HGET', hooks_key, id)
      if record and hook_state(record) == HOOK_PENDING then
        redis.call('HSET', hooks_key, id, with_hook_state(record, HOOK_EXPIRED))
        redis.call('SREM', pending_key, run_id .. ':' .. id)
        append_event(run_key, key_events(prefix, run_id), EVENT.hook_expired,
          cjson.encode({hook_id = id}))
        if session and session ~= '' then
          unwait(key_waiting(prefix), session, 1)
          -- trimmed only: the run it wakes sets the expiry when it writes or ends
          post(prefix, session,
            cjson.encode({type = 'expired', run_id = run_id, token = run_id .. ':' .. id}), false)
        end
        wake = true
      end
    else
      append_event(run_key, key_events(prefix, run_id), EVENT.timer_fired,
        cjson.encode({timer_id = id}))
      redis.call('HDEL', run_key, 'dl')
      wake = true
    end
  end
  if wake then
    if status == STATUS.suspended then
      redis.call('HSET', run_key, 'status', STATUS.pending)
      redis.call('HINCRBY', stats_key, STATUS.suspended, -1)
      enqueue(tasks_key, run_id, rs[3])
    end
    lateness[#lateness + 1] = tostring(now - tonumber(due[j + 1]))
  end
end
local next_due = redis.call('ZRANGE', deadlines_key, 0, 0, 'WITHSCORES')
return {#due / 2, next_due[2] or '', lateness}
