-- FIRE_DUE: fire the due deadlines of one or more partitions (all of a single Redis in one
-- call: an idle pass costs one command, not one per partition; one per call on a cluster,
-- where a script's keys must share a slot).
-- Races closed: two workers firing the same deadline (ZREM inside the script: exactly one
-- pops it); a deadline vs. an answer (expiry only if the hook is still pending); a deadline
-- of a running run (the event is appended, the running worker's suspension sees it and
-- continues).
-- Race closed too: a deadline fired early: `now` is Redis' own TIME, read here, not the
-- worker's clock nor the store's estimate of Redis' clock (runtime/store/redis/_time.py),
-- which is ahead by up to half a round trip when the TIME that set it waited in a busy
-- Redis or event loop: measured, 197 of 2,000 deadlines fired up to ~0.2 s early with
-- the estimate on a loaded machine, once the loop fired exactly at the due time. A pass is
-- rare (when something is due, or every few seconds), so reading TIME costs nothing that
-- matters (a claim, on the hot path, does not read it).
-- Race closed too: a deadline scheduled just after this pass read its partition, while
-- the worker goes to sleep towards a later one: the pass returns the id of the last wake
-- notice of each partition read in the same atomic step, and the worker's blocking read
-- of the notices starts from it, so a notice sent after the pass is never missed.
-- KEYS: for each partition: deadlines, tasks, pending, stats, deadline wake stream.
-- ARGV: now ms ('': Redis' clock; an instant: a test's simulated one), limit, then the
-- prefix of each partition.
-- Returns {now ms, {for each partition {popped, earliest pending score or '', {lateness ms
-- of each fired deadline}, last wake notice id or '0-0'}}}.
local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
if not now then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

local function fire(deadlines_key, tasks_key, pending_key, stats_key, prefix)
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
          settle_first(prefix, run_id, hooks_key, pending_key, deadlines_key, session, id, false)
          if session and session ~= '' then
            unwait(key_waiting(prefix), session, 1)
            -- trimmed only: the run it wakes sets the expiry when it writes or ends
            post(prefix, session,
              cjson.encode({type = 'expired', run_id = run_id, token = run_id .. ':' .. id}),
              false)
          end
          wake = true
        end
      else
        append_event(run_key, key_events(prefix, run_id), EVENT.timer_fired,
          cjson.encode({timer_id = id}))
        drop_run_timer(run_key, member)
        -- Race closed: first(hook(...), sleep(...)) whose timer fired before a worker ran:
        -- an answer meanwhile was accepted, and the run, deciding by the log's order, took
        -- the timer and never used it. The hooks of its first() are withdrawn now.
        settle_first(prefix, run_id, key_hooks(prefix, run_id), pending_key, deadlines_key,
          session, id, false)
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
  return #due / 2, lateness
end

local replies = {}
for i = 1, #KEYS / 5 do
  local k = (i - 1) * 5
  local popped, lateness = fire(KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4], ARGV[i + 2])
  local next_due = redis.call('ZRANGE', KEYS[k + 1], 0, 0, 'WITHSCORES')
  local notice = redis.call('XREVRANGE', KEYS[k + 5], '+', '-', 'COUNT', 1)
  replies[i] = {popped, next_due[2] or '', lateness, notice[1] and notice[1][1] or '0-0'}
end
return {now, replies}
