-- Helpers shared by every script. The loader puts them after the generated header (the
-- constants and key functions of runtime/store/redis/_keys.py and _records.py) and before
-- each script's own body.

-- A hook record is "<state letter><schema flag><metadata JSON>"; scripts read and flip the
-- state letter only.
local function hook_state(record)
  return string.sub(record, 1, 1)
end

local function with_hook_state(record, state)
  return state .. string.sub(record, 2)
end

local function deadline_member(run_id, kind, id)
  return run_id .. DEADLINE_SEP .. kind .. DEADLINE_SEP .. id
end

-- Schedule a deadline. Race closed: workers sleeping towards a later deadline of this
-- partition (or none) while this one is due first: when it becomes the partition's
-- earliest, a notice carrying its due ms wakes their deadline loops (their blocking read of
-- the wake stream, runtime/worker/deadlines.py); one entry is kept, the latest, whose due
-- time is the earliest of any notice still pending.
local function schedule_deadline(deadlines_key, prefix, due, member)
  redis.call('ZADD', deadlines_key, due, member)
  if redis.call('ZRANK', deadlines_key, member) == 0 then
    redis.call('XADD', key_deadline_wake(prefix), 'MAXLEN', 1, '*', 'due', due)
  end
end

local function append_event(run_key, events_key, event_type, data)
  local id = redis.call('XADD', events_key, '*', 't', event_type, 'd', data)
  redis.call('HINCRBY', run_key, 'nev', '1')
  return id
end

-- Store a suspended run's event stream at its used size. Redis (7.0) allocates a stream's
-- newest node at stream-node-max-bytes (4 KB by default) however few entries it holds, so a
-- small log costs ~4.3 KB while it waits, for weeks perhaps; COPY duplicates the nodes at
-- their used size (~0.6 KB for the bench's four events), and RENAME puts the copy in
-- place, ids and all. Bounded: only a log of at most SHRINK_MAX_EVENTS events (the copy is
-- O(log); a longer log wastes at most its last node). Inside the caller's script, so no
-- reader or writer sees the log between the two commands.
local function shrink_events(prefix, run_id, events_key, count)
  if count > SHRINK_MAX_EVENTS then return end
  local copy = key_events_copy(prefix, run_id)
  if redis.call('COPY', events_key, copy) == 1 then redis.call('RENAME', copy, events_key) end
end

-- Every write to a session's outbox trims it and, given the retention `ttl` (false: keep
-- the key's expiry as it is), makes it expire `ttl` seconds after this message, unless
-- one of the session's prompts is pending (`waiting`): then the outbox does not expire.
local function post(prefix, session, message, ttl)
  local outbox = key_outbox(prefix, session)
  local id = redis.call('XADD', outbox, 'MAXLEN', '~', OUTBOX_MAXLEN, '*', 'm', message)
  if ttl and tonumber(redis.call('HGET', key_waiting(prefix), session) or '0') <= 0 then
    redis.call('EXPIRE', outbox, ttl)
  end
  return id
end

local function ack_task(tasks_key, msg)
  redis.call('XACK', tasks_key, GROUP, msg)
  redis.call('XDEL', tasks_key, msg)
end

local function enqueue(tasks_key, run_id, workflow)
  redis.call('XADD', tasks_key, '*', 'r', run_id, 'w', workflow)
end

-- Create run `run_id` in this partition, unless a run of that id exists (then return false,
-- nothing changed): its hash, with `link` (a field naming the run it comes from) set to
-- `linked_id` when given, its session ('' or false: none), its tags (a JSON object; nil:
-- untagged) in the tag index, its task and the partition's count of started runs. Its first
-- events are the caller's to append, in the same script.
-- Race closed: a crash between writing the run and enqueueing it would leave a run no
-- worker ever picks up; a run listed by a tag before it exists, or created without its tags
-- listed, cannot be seen.
local function create_run(prefix, run_id, workflow, now, session, tags, link, linked_id)
  local run_key = key_run(prefix, run_id)
  if redis.call('EXISTS', run_key) == 1 then return false end
  local fields = {'status', STATUS.pending, 'wf', workflow, 'created', now, 'fence', '0'}
  if link then
    fields[#fields + 1] = link
    fields[#fields + 1] = linked_id
  end
  if session and session ~= '' then
    fields[#fields + 1] = 'session'
    fields[#fields + 1] = session
  end
  redis.call('HSET', run_key, unpack(fields))
  if tags then index_tags(prefix, run_key, run_id, now, tags) end
  enqueue(key_tasks(prefix), run_id, workflow)
  redis.call('HINCRBY', key_stats(prefix), 'started', '1')
  return true
end

-- A session's messages may expire only when none of its prompts is pending, across all of
-- its runs: `waiting` counts them per session.
local function unwait(waiting, session, n)
  local left = redis.call('HINCRBY', waiting, session, -n)
  if left <= 0 then redis.call('HDEL', waiting, session) end
  return left
end

-- A pending hook (`record`) ends in `state`: out of the pending index, its deadline gone.
local function retire_hook(hooks_key, pending_key, deadlines_key, run_id, hook_id, record, state)
  redis.call('HSET', hooks_key, hook_id, with_hook_state(record, state))
  redis.call('SREM', pending_key, run_id .. ':' .. hook_id)
  redis.call('ZREM', deadlines_key, deadline_member(run_id, 'h', hook_id))
end

-- The pending hooks of a run, as {hook id, record} pairs. (A first()'s fields begin with
-- '=', '~' or '>', never a pending record's letter; a digest field is skipped by its name.)
local function pending_hooks(hooks_key)
  local hooks = redis.call('HGETALL', hooks_key)
  local pending = {}
  for j = 1, #hooks, 2 do
    local hook_id, record = hooks[j], hooks[j + 1]
    if hook_state(record) == HOOK_PENDING
        and not string.find(hook_id, DIGEST_SUFFIX, 1, true) then
      pending[#pending + 1] = {hook_id, record}
    end
  end
  return pending
end

-- Close every pending hook of a run, with its pending-index entry and its deadline, so
-- nothing of them outlives the run. Returns how many were closed.
local function close_pending_hooks(hooks_key, pending_key, deadlines_key, run_id)
  local pending = pending_hooks(hooks_key)
  for _, hook in ipairs(pending) do
    retire_hook(hooks_key, pending_key, deadlines_key, run_id, hook[1], hook[2], HOOK_CANCELLED)
  end
  return #pending
end

-- Withdraw hook `hook_id` of run `run_id` if still pending: closed, out of the pending
-- index, its deadline gone, its session told (`ttl`: the outbox's expiry, false to leave
-- it).
local function withdraw_hook(prefix, run_id, hooks_key, pending_key, deadlines_key, session,
    hook_id, ttl)
  local record = redis.call('HGET', hooks_key, hook_id)
  if not (record and hook_state(record) == HOOK_PENDING) then return end
  retire_hook(hooks_key, pending_key, deadlines_key, run_id, hook_id, record, HOOK_CLOSED)
  if session and session ~= '' then
    unwait(key_waiting(prefix), session, 1)
    post(prefix, session,
      cjson.encode({type = 'closed', run_id = run_id, token = run_id .. ':' .. hook_id}), ttl)
  end
end

-- Wait `wait_id` (a hook answered or expired, a timer fired) finished: the other hooks of
-- its first(), if it is a branch of one, are withdrawn in the same script (a timer among
-- them has no hook record: withdraw_hook leaves it). Race closed: two hooks of one first()
-- answered before a worker applied the decision: both answers were accepted, the run used
-- the first, and the second stayed "received", acknowledged and never used.
--
-- Until the run suspends on its first(), which writes the group (write_first_group), the
-- group grows as its branches create their waits (APPLY's 'join_first'): each wait holds
-- the group's name (`~<name>` under <wait id>!f), the group the waits joined so far
-- (`~<wait id>,...` under ~<name>!f) and, once one of them finished, its winner
-- (`><wait id>`): the others are withdrawn then, and a wait that joins later at once.
local function settle_first(prefix, run_id, hooks_key, pending_key, deadlines_key, session,
    wait_id, ttl)
  local group = redis.call('HGET', hooks_key, wait_id .. FIRST_SUFFIX)
  if not group then return end
  if string.sub(group, 1, 1) == '~' then
    local field = group .. FIRST_SUFFIX
    group = redis.call('HGET', hooks_key, field)
    -- won already (a timer of the group fires later), or written as a group meanwhile
    if not group or string.sub(group, 1, 1) == '>' then return end
    redis.call('HSET', hooks_key, field, '>' .. wait_id)
  end
  for sibling in string.gmatch(string.sub(group, 2), '[^,]+') do
    if sibling ~= wait_id then
      withdraw_hook(prefix, run_id, hooks_key, pending_key, deadlines_key, session, sibling,
        ttl)
    end
  end
end

-- Wait `wait_id`, just created by a branch of the first() named `name`, joins its group
-- (see settle_first); withdrawn at once if another wait of it finished already. A group
-- written already (the run suspended on it) stays.
local function join_first(prefix, run_id, hooks_key, pending_key, deadlines_key, session,
    wait_id, name, ttl)
  local member = wait_id .. FIRST_SUFFIX
  if redis.call('HGET', hooks_key, member) then return end
  redis.call('HSET', hooks_key, member, '~' .. name)
  local field = '~' .. name .. FIRST_SUFFIX
  local joined = redis.call('HGET', hooks_key, field)
  if not joined then
    redis.call('HSET', hooks_key, field, '~' .. wait_id)
  elseif string.sub(joined, 1, 1) == '>' then
    withdraw_hook(prefix, run_id, hooks_key, pending_key, deadlines_key, session, wait_id, ttl)
  else
    redis.call('HSET', hooks_key, field, joined .. ',' .. wait_id)
  end
end

-- Record the group of waits one first() suspends on (`group`: '=<wait id>,...', under
-- <wait id>!f of each in the hooks hash: a timer's id, t<n>, is never a hook's) and settle
-- it at once if a member has finished already. Race closed: a wait of the group finished
-- while the run still ran, before this write (its timer fired during an on_created, a hook
-- handed out there was answered): settle_first found no group then, the suspension is
-- refused (the event arrived), and an answer before the worker's decision would have been
-- accepted and never used.
local function write_first_group(prefix, run_id, hooks_key, pending_key, deadlines_key,
    session, group, ttl)
  for wait_id in string.gmatch(string.sub(group, 2), '[^,]+') do
    local joined = redis.call('HGET', hooks_key, wait_id .. FIRST_SUFFIX)
    if joined and string.sub(joined, 1, 1) == '~' then  -- its winner, if any, is settled below
      redis.call('HDEL', hooks_key, joined .. FIRST_SUFFIX)
    end
    redis.call('HSET', hooks_key, wait_id .. FIRST_SUFFIX, group)
  end
  for wait_id in string.gmatch(string.sub(group, 2), '[^,]+') do
    local record = redis.call('HGET', hooks_key, wait_id)
    local finished
    if record then
      finished = hook_state(record) ~= HOOK_PENDING
    else  -- a timer: fired once its deadline is gone
      finished = not redis.call('ZSCORE', deadlines_key, deadline_member(run_id, 't', wait_id))
    end
    if finished then
      settle_first(prefix, run_id, hooks_key, pending_key, deadlines_key, session, wait_id, ttl)
      return
    end
  end
end

-- The run's pending timers (sleeps, retry backoffs) by their deadline members: field 'dl'
-- of its hash, a JSON array. Race closed: two timers of one run pending at once (sleeps in
-- parallel branches, two steps backing off): 'dl' named one, the last scheduled, so the
-- other's deadline outlived the run's end and, once the run's id was used again, fired
-- into the new run (a sleep it had just begun returned at once). Before 2026-12-01 'dl'
-- held one member, plain: such a value is read as a list of one (a run id, which begins
-- a member, never begins with '[').
local function run_timers(run_key)
  local dl = redis.call('HGET', run_key, 'dl')
  if not dl then return {} end
  if string.sub(dl, 1, 1) ~= '[' then return {dl} end
  return cjson.decode(dl)
end

local function set_run_timers(run_key, members)
  if #members == 0 then
    redis.call('HDEL', run_key, 'dl')
  else
    redis.call('HSET', run_key, 'dl', cjson.encode(members))
  end
end

local function add_run_timer(run_key, member)
  local members = run_timers(run_key)
  for _, known in ipairs(members) do
    if known == member then return end
  end
  members[#members + 1] = member
  set_run_timers(run_key, members)
end

-- A timer fired or withdrawn: no longer one of the run's.
local function drop_run_timer(run_key, member)
  local members = run_timers(run_key)
  for i, known in ipairs(members) do
    if known == member then
      table.remove(members, i)
      set_run_timers(run_key, members)
      return
    end
  end
end

-- A run ended (finished or cancelled): its checkpoints and its timers go, its pending hooks
-- close, and its keys expire together after the retention; the session's messages too,
-- unless another of its runs still has a prompt pending. A tagged run (`tags`: its JSON,
-- false when untagged) leaves the tag index when its keys expire (lua/tags.lua). Returns
-- whether the run ever started a child (child()).
local function end_run(prefix, run_id, keys, session, ttl, tags, now)
  redis.call('DEL', keys.ckpt, key_inbox(prefix, run_id))
  local had_children = redis.call('EXPIRE', key_children(prefix, run_id), ttl) == 1
  local timers = run_timers(keys.run)
  if #timers > 0 then
    redis.call('ZREM', keys.deadlines, unpack(timers))
    redis.call('HDEL', keys.run, 'dl')
  end
  local closed = close_pending_hooks(keys.hooks, keys.pending, keys.deadlines, run_id)
  redis.call('EXPIRE', keys.run, ttl)
  redis.call('EXPIRE', keys.events, ttl)
  redis.call('EXPIRE', keys.hooks, ttl)
  if session and session ~= '' then
    local waiting = key_waiting(prefix)
    local left = tonumber(redis.call('HGET', waiting, session) or '0')
    if closed > 0 then left = unwait(waiting, session, closed) end
    if left <= 0 then redis.call('EXPIRE', key_outbox(prefix, session), ttl) end
  end
  if tags then tags_ended(prefix, run_id, tags, now, ttl) end
  return had_children
end

-- A run that has a parent (it was started by child()) ended: the parent's log learns it
-- (child.completed, with ``data``) and a suspended parent is woken.
local function child_ended(prefix, run_key, data)
  local parent = redis.call('HGET', run_key, 'parent')
  if not parent then return end
  local parent_key = key_run(prefix, parent)
  local ps = redis.call('HMGET', parent_key, 'status', 'wf')
  if not ps[1] or FINISHED[ps[1]] then return end
  append_event(parent_key, key_events(prefix, parent), EVENT.child_completed, data)
  if ps[1] == STATUS.suspended then
    redis.call('HSET', parent_key, 'status', STATUS.pending)
    redis.call('HINCRBY', key_stats(prefix), STATUS.suspended, '-1')
    enqueue(key_tasks(prefix), parent, ps[2])
  end
end

-- The keys of a child run (in its parent's partition: the partition's keys are the
-- parent's), as run_keys() gives a script's own.
local function child_keys(prefix, child, parent_keys)
  return {
    run = key_run(prefix, child), events = key_events(prefix, child),
    ckpt = key_ckpt(prefix, child), hooks = key_hooks(prefix, child),
    tasks = parent_keys.tasks, deadlines = parent_keys.deadlines,
    pending = parent_keys.pending, stats = parent_keys.stats}
end

-- Cancel run `id` (`run_keys_of`: its keys) if it has not finished, and the runs it started
-- (child()), depth first; appends each id it ended to `ended`. `event` is the data of
-- their workflow.cancelled, `message` what their sessions are told (false: a status
-- message naming each run). `lost`: for a child whose branch lost its parent's first(),
-- the id of that parent, which goes on: nobody waits for the child's result, so the parent
-- is not told, and its prompts are withdrawn (each 'closed' in the session, as a first()'s
-- losing hooks are); its status message says why (reason 'lost_first') and which run the
-- conversation continues in, so a chat follows that run instead of telling the visitor
-- the conversation stopped.
local function cancel_run(prefix, id, run_keys_of, now, ttl, event, message, ended, lost)
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
  if lost then
    for _, hook in ipairs(pending_hooks(run_keys_of.hooks)) do
      withdraw_hook(prefix, id, run_keys_of.hooks, run_keys_of.pending, run_keys_of.deadlines,
        session, hook[1], ttl)
    end
    if session and session ~= '' then  -- the chat goes on with the run that decided
      post(prefix, session, cjson.encode({type = 'status', status = STATUS.cancelled,
        run_id = id, reason = 'lost_first', continues_in = lost}), ttl)
    end
  else
    if session and session ~= '' then
      post(prefix, session,
        message or cjson.encode({type = 'status', status = STATUS.cancelled, run_id = id}), ttl)
    end
    child_ended(prefix, run_keys_of.run,
      cjson.encode({child_run_id = id, status = STATUS.cancelled}))
  end
  end_run(prefix, id, run_keys_of, session, ttl, rs[5], now)
  ended[#ended + 1] = id
  for _, child in ipairs(redis.call('SMEMBERS', key_children(prefix, id))) do
    cancel_run(prefix, child, child_keys(prefix, child, run_keys_of), now, ttl, event, message,
      ended, lost)
  end
end

-- Every per-run script is given one key, the run's hash (RunKeys.declared in _keys.py);
-- the run's other keys and its partition's share its hash tag, so they are built here
-- rather than sent as seven more arguments on every call.
local function run_keys()
  local run = KEYS[1]
  local _, prefix_end = string.find(run, PARTITION_PREFIX_END, 1, true)
  local prefix = string.sub(run, 1, prefix_end)
  local run_id = string.sub(run, #key_run(prefix, '') + 1)
  return {run = run, prefix = prefix, run_id = run_id, events = key_events(prefix, run_id),
          ckpt = key_ckpt(prefix, run_id), hooks = key_hooks(prefix, run_id),
          tasks = key_tasks(prefix), deadlines = key_deadlines(prefix),
          pending = key_pending(prefix), stats = key_stats(prefix)}
end
