-- APPLY: a fenced batch of writes by the worker that holds the run's lease: events,
-- checkpoint writes and deletes, hook creation (record + pending index + deadline + the
-- session prompt), the run's timer, session messages, its tags (+ the tag index); then, optionally, the suspension or
-- the end of the run (or its blocking: its code no longer matches its log), with the
-- task's acknowledgement.
-- Races closed:
--  - a zombie worker (paused past its lease) writing after another took over: the fence no
--    longer matches and nothing is written;
--  - an answer, expiry or timer landing while the run is still executing (e.g. resume_hook
--    called from inside on_created): every call returns the events that arrived after the
--    last one this execution saw (so a later write cannot hide them behind its own id), and
--    a suspension is refused when there are any: the worker continues instead of
--    stranding the run;
--  - a run that ends with a hook still pending (its step failed after handing out the
--    token): the hook is closed with its deadline and pending-index entry;
--  - a run listed under tags it no longer has (set_tags): its hash and the tag index
--    change in this one script;
--  - a crash between recording the hook and acknowledging the task: both are one script,
--    so the task is either still pending (replayed) or the suspension is fully recorded.
-- ARGV[1]: the request as JSON: {fence, now, max_events, after, retention, known (optional),
--   writes = [op...], suspension = [op...] (optional), finish = {status, value} (optional)}.
--   now, retention and known are strings: passed on to Redis as they are (a Lua number
--   given to redis.call is formatted with snprintf on every call).
--   Ops are arrays built by runtime/store/redis/__init__.py from runtime/store/writes.py.
-- Returns {'lost'} | {'limit', count} | {'stale'} | {'ok' | 'refused', last appended id,
--   arrived events, the ids of the other runs it ended: children that lost a first(), or
--   that ended with it}.
local keys = run_keys()
local req = cjson.decode(ARGV[1])

-- What this script needs of the run's hash, in one read: none of it changes before the
-- script writes it (no op sets the session, the task message or the fence).
local rs = redis.call('HMGET', keys.run, 'fence', 'nev', 'session', 'tags', 'msg')
if rs[1] ~= req.fence then return {'lost'} end

local function count_events(ops)
  local n = 0
  for _, op in ipairs(ops) do
    if op[1] == 'event' then n = n + 1 end
  end
  return n
end

local writes, suspension, finish = req.writes, req.suspension, req.finish
local new_events = count_events(writes) + (suspension and count_events(suspension) or 0)
local count = tonumber(rs[2] or '0')
-- A suspension leaves room for the event that wakes the run (an answer, an expiry, a
-- timer). Race closed: a run suspended with its log exactly full took no answer
-- (lua/resume.lua refuses one at the limit) and, without a timeout, stayed suspended for
-- good on a hook nobody could answer; refused here, the run fails clearly instead.
local room = suspension and 1 or 0
if count + new_events + room > tonumber(req.max_events) then
  return {'limit', tostring(count)}
end

-- This run's appends are counted here and 'nev' written once, with the status where the
-- script sets one (event_count).
local appended = 0
local function append(event_type, data)
  appended = appended + 1
  return redis.call('XADD', keys.events, '*', 't', event_type, 'd', data)
end
local function event_count()
  if appended == 0 then return end
  return 'nev', string.format('%d', count + appended)
end

-- The events others appended after the last one this execution saw. None when the run holds
-- exactly the events the execution knows of (`known`: every append counts itself in 'nev',
-- which the claim's replay cache relies on too): then the log is not read.
local arrived
if req.known == (rs[2] or '0') then  -- (absent: nil, never equal)
  arrived = {}
else
  arrived = redis.call('XRANGE', keys.events, '(' .. req.after, '+')
end
-- A first() decided without an answer or expiry that came in meanwhile: the decision closes
-- a hook that has ended since this execution read the log. Refused whole, nothing written:
-- the execution starts again from the log, where that end decides. Race closed: an answer
-- to a hook of one branch, given while another branch that does more than wait (a step)
-- finished in the worker, was accepted and never used.
if #arrived > 0 then
  local ended_since = {}
  for _, event in ipairs(arrived) do
    local fields = event[2]
    if fields[2] == EVENT.hook_received or fields[2] == EVENT.hook_expired then
      ended_since[cjson.decode(fields[4]).hook_id] = true
    end
  end
  for _, op in ipairs(writes) do
    if op[1] == 'close_hook' and ended_since[op[2]] then return {'stale'} end
  end
end

-- A suspension that waits for a message already buffered takes it into the log now, and
-- is refused like one that an answer overtook. (Race closed: a message sent just before
-- the run suspends is neither lost nor left waiting in the inbox.)
if suspension then
  for _, op in ipairs(suspension) do
    if op[1] == 'receive' then
      local inbox = key_inbox(keys.prefix, keys.run_id)
      for _, entry in ipairs(redis.call('XRANGE', inbox, '-', '+')) do
        local fields = entry[2]
        if fields[2] == op[2] then
          redis.call('XDEL', inbox, entry[1])
          local id = append(EVENT.message_received, fields[4])
          arrived[#arrived + 1] = {id, {'t', EVENT.message_received, 'd', fields[4]}}
          break
        end
      end
    end
  end
end
local refused = suspension ~= nil and #arrived > 0
local session, run_tags = rs[3], rs[4]
if session == '' then session = false end
local outbox = session and key_outbox(keys.prefix, session)

local last = ''
local ended = {}  -- the runs this script ended besides this one (its children)
local function apply(ops)
  for _, op in ipairs(ops) do
    local kind = op[1]
    if kind == 'event' then
      last = append(op[2], op[3])
    elseif kind == 'checkpoint' then
      redis.call('HSET', keys.ckpt, op[2], op[3])
    elseif kind == 'uncheckpoint' then
      redis.call('HDEL', keys.ckpt, op[2])
    elseif kind == 'hook' then
      -- {'hook', hook id, record, token, expires ms or absent}; again for a hook asked
      -- again with a fresh deadline: only while it is pending (an answer that got in
      -- meanwhile stays)
      local current = redis.call('HGET', keys.hooks, op[2])
      if not current or hook_state(current) == HOOK_PENDING then
        redis.call('HSET', keys.hooks, op[2], op[3])
        redis.call('SADD', keys.pending, op[4])
        if op[5] then
          schedule_deadline(keys.deadlines, keys.prefix, op[5],
            deadline_member(keys.run_id, 'h', op[2]))
        end
      end
    elseif kind == 'asking' then
      -- {'asking', hook id, due ms}: its on_created is to run. Race closed: the deadline
      -- firing before anyone was asked (the worker died between recording the hook and
      -- on_created's return): FIRE_DUE leaves a hook marked so pending, for the
      -- re-execution to ask.
      redis.call('HSET', keys.run, 'ask:' .. op[2], op[3])
    elseif kind == 'asked' then
      -- {'asked', hook id}: on_created returned; a deadline FIRE_DUE left meanwhile is due
      local due = redis.call('HGET', keys.run, 'ask:' .. op[2])
      if due then
        redis.call('HDEL', keys.run, 'ask:' .. op[2])
        local record = redis.call('HGET', keys.hooks, op[2])
        local member = deadline_member(keys.run_id, 'h', op[2])
        if record and hook_state(record) == HOOK_PENDING
            and not redis.call('ZSCORE', keys.deadlines, member) then
          schedule_deadline(keys.deadlines, keys.prefix, due, member)
        end
      end
    elseif kind == 'timer' then
      -- {'timer', timer id, due ms}: a durable timer of the run (a sleep, a retry backoff)
      local member = deadline_member(keys.run_id, 't', op[2])
      schedule_deadline(keys.deadlines, keys.prefix, op[3], member)
      add_run_timer(keys.run, member)
    elseif kind == 'close_hook' then
      -- {'close_hook', hook id, token}: withdrawn, if still pending (an answer that got in
      -- first stays; first() already decided by then)
      withdraw_hook(keys.prefix, keys.run_id, keys.hooks, keys.pending, keys.deadlines,
        session, op[2], req.retention)
    elseif kind == 'join_first' then
      -- {'join_first', wait id, group name}: a hook or timer just created by a branch of a
      -- first(), before the run suspends on it: the first of the group to finish withdraws
      -- the others from then on (settle_first)
      join_first(keys.prefix, keys.run_id, keys.hooks, keys.pending, keys.deadlines, session,
        op[2], op[3], req.retention)
    elseif kind == 'first_group' then
      -- {'first_group', '=<wait id>,<wait id>...'}: the hooks and timers one first() waits
      -- on; the first answered, expired or fired withdraws the other hooks (settle_first,
      -- lua/resume.lua, FIRE_DUE)
      write_first_group(keys.prefix, keys.run_id, keys.hooks, keys.pending, keys.deadlines,
        session, op[2], req.retention)
    elseif kind == 'cancel_child' then
      -- {'cancel_child', run id}: a child of this run whose branch lost a first(), cancelled
      -- with the decision. Race closed: it ran on until this run ended (days, for a
      -- conversation), its prompts pending and its steps spending on a result nobody
      -- would read.
      if redis.call('SISMEMBER', key_children(keys.prefix, keys.run_id), op[2]) == 1 then
        cancel_run(keys.prefix, op[2], child_keys(keys.prefix, op[2], keys), req.now,
          req.retention, cjson.encode({reason = "it lost its parent's first()"}), false, ended,
          keys.run_id)
      end
    elseif kind == 'cancel_timer' then
      local member = deadline_member(keys.run_id, 't', op[2])
      redis.call('ZREM', keys.deadlines, member)
      drop_run_timer(keys.run, member)
    elseif kind == 'start_child' then
      -- {'start_child', child id, workflow, workflow.started data}: created once (its id is
      -- derived from the parent and the call's position), in the parent's partition
      if create_run(keys.prefix, op[2], op[3], req.now, session, nil, 'parent', keys.run_id) then
        append_event(key_run(keys.prefix, op[2]), key_events(keys.prefix, op[2]),
          EVENT.workflow_started, op[4])
        redis.call('SADD', key_children(keys.prefix, keys.run_id), op[2])
      end
    elseif kind == 'continue' then
      -- {'continue', run id, workflow, workflow.started data, tags JSON or ''}: the run
      -- continue_as_new hands over to, created once (its id derives from this run's), in
      -- this partition, with this run's session, whose active run it becomes.
      -- Race closed: a crash between ending this run and starting its successor (a
      -- conversation that silently stops) or a session left on the ended run: this script
      -- does all of it with the end of the run.
      -- op[6]: the message.received data of the messages in this run's log that no
      -- receive kept. They, then those that arrived in the log since this execution
      -- read it, then this run's inbox, wait in the successor's inbox in that order (a
      -- topic's messages reach the log only while its inbox holds none of that topic).
      -- Race closed: messages whose sends were accepted ended, unread, with this run.
      local tags = op[5] ~= '' and op[5] or nil
      if create_run(keys.prefix, op[2], op[3], req.now, session, tags, 'continued_from',
          keys.run_id) then
        append_event(key_run(keys.prefix, op[2]), key_events(keys.prefix, op[2]),
          EVENT.workflow_started, op[4])
        local handed_on = key_inbox(keys.prefix, op[2])
        local function hand_on(data)
          redis.call('XADD', handed_on, '*', 't', cjson.decode(data).topic, 'd', data)
        end
        for _, data in ipairs(op[6] or {}) do hand_on(data) end
        for _, event in ipairs(arrived) do
          if event[2][2] == EVENT.message_received then hand_on(event[2][4]) end
        end
        local inbox = key_inbox(keys.prefix, keys.run_id)
        for _, entry in ipairs(redis.call('XRANGE', inbox, '-', '+')) do
          redis.call('XADD', handed_on, '*', unpack(entry[2]))
        end
        if session then
          local meta = key_session_meta(keys.prefix, session)
          if redis.call('HGET', meta, 'run') == keys.run_id then
            redis.call('HSET', meta, 'run', op[2])
          end
        end
        redis.call('HSET', keys.run, 'continued_to', op[2])
      end
    elseif kind == 'receive' then
      -- the run waits: the next message of the topic goes to its log directly
      redis.call('HSET', keys.run, 'recv:' .. op[2], 1)
    elseif kind == 'unreceive' then
      redis.call('HDEL', keys.run, 'recv:' .. op[2])
    elseif kind == 'post' then
      if outbox then post(keys.prefix, session, op[2], req.retention) end
    elseif kind == 'prompt' then
      if outbox then
        post(keys.prefix, session, op[2], false)
        -- a pending prompt must stay visible however long the visitor takes
        redis.call('HINCRBY', key_waiting(keys.prefix), session, 1)
        redis.call('PERSIST', outbox)
      end
    elseif kind == 'tags' then
      -- {'tags', the run's tags as a JSON object}: the hash and the tag index (tags.lua)
      run_tags = retag(keys.prefix, keys.run, keys.run_id, run_tags, op[2], req.now)
    else
      error('APPLY: unknown op ' .. tostring(kind))
    end
  end
end

apply(writes)
if refused or not (suspension or finish) then
  if appended > 0 then redis.call('HSET', keys.run, event_count()) end
  return {refused and 'refused' or 'ok', last, arrived, ended}
end
if suspension then apply(suspension) end

local msg = rs[5]
if msg then ack_task(keys.tasks, msg) end
redis.call('HDEL', keys.run, 'msg', 'lease', 'owner')
if suspension then
  redis.call('HSET', keys.run, 'status', STATUS.suspended, event_count())
  redis.call('HINCRBY', keys.stats, STATUS.suspended, '1')
  shrink_events(keys.prefix, keys.run_id, keys.events, count + new_events)
elseif finish.status == STATUS.blocked then
  -- not an end: the run keeps its hooks, deadlines and checkpoints for the retry
  redis.call('HSET', keys.run, 'status', STATUS.blocked, 'blocked', finish.value, event_count())
  redis.call('HINCRBY', keys.stats, STATUS.blocked, '1')
else
  redis.call('HSET', keys.run, 'status', finish.status, 'out', finish.value, 'ended', req.now,
    event_count())
  redis.call('HINCRBY', keys.stats, finish.status, '1')
  if finish.notify then child_ended(keys.prefix, keys.run, finish.notify) end
  if end_run(keys.prefix, keys.run_id, keys, session, req.retention, run_tags, req.now) then
    -- Its children still running end with it, cancelled (as a cancel of the run would end
    -- them). Race closed: a run that ended while a child ran (a first() that a sleep won,
    -- a failure in a parallel branch) left the child running for good: its prompt kept its
    -- session's messages from expiring, and nothing could reach it through its parent.
    local reason = cjson.encode({reason = 'its parent run ended (' .. finish.status .. ')'})
    for _, child in ipairs(redis.call('SMEMBERS', key_children(keys.prefix, keys.run_id))) do
      cancel_run(keys.prefix, child, child_keys(keys.prefix, child, keys), req.now,
        req.retention, reason, false, ended)
    end
  end
end
return {'ok', last, arrived, ended}
