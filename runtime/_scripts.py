"""The Lua scripts: every state change that touches more than one key is one of these.

Each script runs atomically on the single slot of one partition (``{p:N}``), so it works
unchanged on Redis Cluster. Key names are built in :mod:`runtime._keys`; scripts that must
reach a key they cannot know in advance (a run named in a deadline member, a session's
outbox) rebuild it from the partition prefix passed in ARGV — still the same slot.

Hook values in the per-run hooks hash are ``<status><schema flag><metadata json>``:
status is one of P (pending), R (received), E (expired), C (cancelled) and the schema flag
is S when answers must be validated against a JSON Schema, '-' otherwise. The accepted
answer's digest is kept under ``<hook_id>!p`` to tell a duplicate from a conflict.
"""

from __future__ import annotations

# Lua functions shared by several scripts (each script is sent whole, so they are
# prepended to the scripts that use them).
_UNWAIT = """
-- a session's outbox may expire only when none of its prompts is pending (across runs)
local function unwait(waiting, sid, n)
  local left = redis.call('HINCRBY', waiting, sid, -n)
  if left <= 0 then redis.call('HDEL', waiting, sid) end
  return left
end
"""

_CLOSE_PENDING_HOOKS = """
-- Close (C) every pending hook of a run, with its pending-index entry and its deadline, so
-- nothing of them outlives the run. Returns how many were closed.
local function close_pending_hooks(hooks_key, pending_key, deadlines_key, run_id)
  local hooks = redis.call('HGETALL', hooks_key)
  local closed = 0
  for j = 1, #hooks, 2 do
    local f, v = hooks[j], hooks[j + 1]
    if string.sub(v, 1, 1) == 'P' and not string.find(f, '!', 1, true) then
      redis.call('HSET', hooks_key, f, 'C' .. string.sub(v, 2))
      redis.call('SREM', pending_key, run_id .. ':' .. f)
      redis.call('ZREM', deadlines_key, run_id .. '|h|' .. f)
      closed = closed + 1
    end
  end
  return closed
end
"""

# Take the run's lease for one execution and load everything replay needs in the same
# round trip. Race closed: two workers handed the same run (a reclaimed task whose first
# consumer is merely slow, or a duplicate task) — only one gets a live lease; the fence
# increments on every takeover so the loser's later writes are refused.
CLAIM = """
local run = KEYS[1]
local rs = redis.call('HMGET', run, 'status', 'lease', 'wf', 'session')
local s = rs[1]
if (not s) or s == 'suspended' or s == 'completed' or s == 'failed' or s == 'cancelled' then
  redis.call('XACK', KEYS[4], 'workers', ARGV[4])
  redis.call('XDEL', KEYS[4], ARGV[4])
  return {'skip', s or 'missing'}
end
-- a live lease of another worker: busy. The same worker may take its own run back (its
-- previous execution of it was abandoned; a worker never runs one run twice at once).
if s == 'running' and tonumber(rs[2] or '0') > tonumber(ARGV[2])
    and redis.call('HGET', run, 'owner') ~= ARGV[1] then
  return {'busy'}
end
local fence = redis.call('HINCRBY', run, 'fence', 1)
redis.call('HSET', run, 'status', 'running', 'owner', ARGV[1],
  'lease', tonumber(ARGV[2]) + tonumber(ARGV[3]), 'msg', ARGV[4])
return {'ok', tostring(fence), rs[3], rs[4] or '',
  redis.call('XRANGE', KEYS[2], '-', '+'), redis.call('HGETALL', KEYS[3])}
"""

# A fenced batch of writes by the worker that holds the lease: events, checkpoint
# writes/deletes, hook creation (hooks hash + pending index + deadline + session prompt),
# and optionally the suspension or the end of the run with the task's XACK.
# Races closed:
#  - a zombie worker (paused past its lease) writing after another took over: the fence
#    no longer matches and nothing is written;
#  - an answer/expiry/timer landing while the run is still executing (e.g. resume_hook
#    called from inside on_created): every call returns the events that arrived after the
#    last one this execution saw (so a later write cannot hide them behind its own id),
#    and a suspension is refused when there are any: the worker continues instead of
#    stranding the run;
#  - a run that ends with a hook still pending (its step failed after handing out the
#    token): the hook is closed (C) with its deadline and pending-index entry, so nothing
#    of it outlives the run;
#  - a crash between recording the hook and acknowledging the task: both are one script,
#    so the task is either still pending (replayed) or the suspension is fully recorded.
# ARGV: fence, now_ms, max_events, run_id, mode ('' | 'suspend' | 'finish'), last_id,
#       finish_status, finish_value, retention_seconds, then ops (see ARITY).
APPLY = (
    _UNWAIT
    + _CLOSE_PENDING_HOOKS
    + """
local run = KEYS[1]
if redis.call('HGET', run, 'fence') ~= ARGV[1] then return {'lost'} end
local ARITY = {E = 2, C = 2, D = 1, H = 3, Z = 2, O = 1, P = 1, F = 2, S = 0}
local n_events = 0
local i = 10
while i <= #ARGV do
  local op = ARGV[i]
  if op == 'E' then n_events = n_events + 1 end
  i = i + 1 + ARITY[op]
end
local nev = tonumber(redis.call('HGET', run, 'nev') or '0')
if nev + n_events > tonumber(ARGV[3]) then return {'limit', tostring(nev)} end
local mode = ARGV[5]
local external = redis.call('XRANGE', KEYS[2], '(' .. ARGV[6], '+')
local refuse = mode == 'suspend' and #external > 0
local session = redis.call('HGET', run, 'session')
local prefix = string.gsub(KEYS[6], 'deadlines$', '')
local waiting = prefix .. 'waiting'
local outbox = nil
if session and session ~= '' then
  outbox = prefix .. 'session:' .. session .. ':outbox'
end
local last = ''
i = 10
while i <= #ARGV do
  local op = ARGV[i]
  if op == 'S' then
    if refuse then break end
  elseif op == 'E' then
    last = redis.call('XADD', KEYS[2], '*', 't', ARGV[i + 1], 'd', ARGV[i + 2])
    redis.call('HINCRBY', run, 'nev', 1)
  elseif op == 'C' then
    redis.call('HSET', KEYS[3], ARGV[i + 1], ARGV[i + 2])
  elseif op == 'D' then
    redis.call('HDEL', KEYS[3], ARGV[i + 1])
  elseif op == 'H' then
    redis.call('HSET', KEYS[4], ARGV[i + 1], ARGV[i + 2])
    redis.call('SADD', KEYS[7], ARGV[i + 3])
  elseif op == 'Z' then
    redis.call('ZADD', KEYS[6], ARGV[i + 1], ARGV[i + 2])
  elseif op == 'O' then
    if outbox then redis.call('XADD', outbox, 'MAXLEN', '~', 10000, '*', 'm', ARGV[i + 1]) end
  elseif op == 'P' then
    if outbox then
      redis.call('XADD', outbox, 'MAXLEN', '~', 10000, '*', 'm', ARGV[i + 1])
      -- a pending prompt must stay visible however long the visitor takes
      redis.call('HINCRBY', waiting, session, 1)
      redis.call('PERSIST', outbox)
    end
  elseif op == 'F' then
    redis.call('HSET', run, ARGV[i + 1], ARGV[i + 2])
  end
  i = i + 1 + ARITY[op]
end
if refuse then return {'continue', last, external} end
if mode == 'suspend' or mode == 'finish' then
  local msg = redis.call('HGET', run, 'msg')
  if msg then
    redis.call('XACK', KEYS[5], 'workers', msg)
    redis.call('XDEL', KEYS[5], msg)
  end
  redis.call('HDEL', run, 'msg', 'lease', 'owner')
  if mode == 'suspend' then
    redis.call('HSET', run, 'status', 'suspended')
    redis.call('HINCRBY', KEYS[8], 'suspended', 1)
  else
    redis.call('HSET', run, 'status', ARGV[7], 'out', ARGV[8], 'ended', ARGV[2])
    redis.call('HINCRBY', KEYS[8], ARGV[7], 1)
    redis.call('DEL', KEYS[3])
    local dl = redis.call('HGET', run, 'dl')
    if dl then
      redis.call('ZREM', KEYS[6], dl)
      redis.call('HDEL', run, 'dl')
    end
    local closed = close_pending_hooks(KEYS[4], KEYS[7], KEYS[6], ARGV[4])
    -- retention: a finished run's keys expire together
    local ttl = tonumber(ARGV[9])
    redis.call('EXPIRE', run, ttl)
    redis.call('EXPIRE', KEYS[2], ttl)
    redis.call('EXPIRE', KEYS[4], ttl)
    if outbox then
      local left = tonumber(redis.call('HGET', waiting, session) or '0')
      if closed > 0 then left = unwait(waiting, session, closed) end
      if left <= 0 then redis.call('EXPIRE', outbox, ttl) end
    end
  end
end
return {'ok', last, external}
"""
)

# Deliver an answer. Races closed:
#  - answer vs. deadline: both check the hook is still pending inside one script, so
#    exactly one of hook.received / hook.expired is recorded;
#  - answer vs. suspension: the run is enqueued only if already suspended; if it is still
#    executing, the worker's suspension (APPLY) sees this event and continues instead;
#  - duplicate answers: the first one flips the hook to R; later ones compare digests.
# ARGV: run_id, hook_id, payload_json, token, validated ('0'|'1'), max_events, event_data,
#       payload digest (sha1 of the canonical JSON)
RESUME = (
    _UNWAIT
    + """
local v = redis.call('HGET', KEYS[3], ARGV[2])
if not v then
  if redis.call('EXISTS', KEYS[1]) == 0 then return {'no_run'} end
  return {'no_hook'}
end
local st = string.sub(v, 1, 1)
if st == 'R' then
  if redis.call('HGET', KEYS[3], ARGV[2] .. '!p') == ARGV[8] then
    return {'dup'}
  end
  return {'conflict'}
end
if st == 'E' then return {'expired'} end
if st == 'C' then return {'cancelled'} end
local rs = redis.call('HMGET', KEYS[1], 'status', 'nev', 'session', 'wf')
local s = rs[1]
if s == 'completed' or s == 'failed' or s == 'cancelled' then return {'finished', s} end
if string.sub(v, 2, 2) == 'S' and ARGV[5] ~= '1' then return {'schema', v} end
if tonumber(rs[2] or '0') >= tonumber(ARGV[6]) then return {'limit'} end
redis.call('HSET', KEYS[3], ARGV[2], 'R' .. string.sub(v, 2),
  ARGV[2] .. '!p', ARGV[8])
redis.call('XADD', KEYS[2], '*', 't', 'hook.received', 'd', ARGV[7])
redis.call('HINCRBY', KEYS[1], 'nev', 1)
redis.call('SREM', KEYS[6], ARGV[4])
redis.call('ZREM', KEYS[5], ARGV[1] .. '|h|' .. ARGV[2])
if rs[3] and rs[3] ~= '' then
  local prefix = string.gsub(KEYS[5], 'deadlines$', '')
  unwait(prefix .. 'waiting', rs[3], 1)
  -- every page of the session learns the prompt was answered, in the same atomic step
  redis.call('XADD', prefix .. 'session:' .. rs[3] .. ':outbox',
    'MAXLEN', '~', 10000, '*', 'm', '{"type":"answered","run_id":"' .. ARGV[1] .. '","token":"'
    .. ARGV[4] .. '","payload":' .. ARGV[3] .. '}')
end
if s == 'suspended' then
  redis.call('HSET', KEYS[1], 'status', 'pending')
  redis.call('HINCRBY', KEYS[7], 'suspended', -1)
  redis.call('XADD', KEYS[4], '*', 'r', ARGV[1], 'w', rs[4])
end
return {'ok'}
"""
)

# Fire due deadlines of one partition. Races closed: two workers' timer loops firing the
# same deadline (ZREM inside the script: exactly one pops it); a deadline vs. an answer
# (expiry only if the hook is still pending); a deadline of a running run (the event is
# appended, the running worker's suspension sees it and continues).
# Members are "<run_id>|h|<hook_id>" (hook timeout) or "<run_id>|t|<timer_id>" (sleep,
# retry backoff). ARGV: now_ms, limit, partition prefix.
# Returns {popped, earliest pending score or '', {lateness ms of each fired deadline}}.
FIRE_DUE = (
    _UNWAIT
    + """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]),
  'WITHSCORES')
local fired = 0
local lateness = {}
for j = 1, #due, 2 do
  local m = due[j]
  redis.call('ZREM', KEYS[1], m)
  local bar = string.find(m, '|', 1, true)
  local run_id = string.sub(m, 1, bar - 1)
  local kind = string.sub(m, bar + 1, bar + 1)
  local id = string.sub(m, bar + 3)
  local run = ARGV[3] .. 'run:' .. run_id
  local rs = redis.call('HMGET', run, 'status', 'session', 'wf')
  local s = rs[1]
  if s and s ~= 'completed' and s ~= 'failed' and s ~= 'cancelled' then
    local wake = false
    if kind == 'h' then
      local hooks = run .. ':hooks'
      local v = redis.call('HGET', hooks, id)
      if v and string.sub(v, 1, 1) == 'P' then
        redis.call('HSET', hooks, id, 'E' .. string.sub(v, 2))
        redis.call('SREM', KEYS[3], run_id .. ':' .. id)
        redis.call('XADD', run .. ':events', '*', 't', 'hook.expired', 'd',
          '{"hook_id":"' .. id .. '"}')
        redis.call('HINCRBY', run, 'nev', 1)
        if rs[2] and rs[2] ~= '' then
          unwait(ARGV[3] .. 'waiting', rs[2], 1)
          redis.call('XADD', ARGV[3] .. 'session:' .. rs[2] .. ':outbox', 'MAXLEN', '~', 10000,
            '*', 'm',
            '{"type":"expired","run_id":"' .. run_id .. '","token":"' .. run_id .. ':' .. id
            .. '"}')
        end
        wake = true
      end
    else
      redis.call('XADD', run .. ':events', '*', 't', 'timer.fired', 'd',
        '{"timer_id":"' .. id .. '"}')
      redis.call('HINCRBY', run, 'nev', 1)
      redis.call('HDEL', run, 'dl')
      wake = true
    end
    if wake and s == 'suspended' then
      redis.call('HSET', run, 'status', 'pending')
      redis.call('HINCRBY', KEYS[4], 'suspended', -1)
      redis.call('XADD', KEYS[2], '*', 'r', run_id, 'w', rs[3])
    end
    if wake then
      fired = fired + 1
      lateness[#lateness + 1] = tostring(tonumber(ARGV[1]) - tonumber(due[j + 1]))
    end
  end
end
local nxt = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {#due / 2, nxt[2] or '', lateness}
"""
)

# Cancel a run. Races closed: cancel vs. a running execution (the fence moves, so the
# worker's next write is refused and it stops); cancel vs. an answer or a deadline (hooks
# flip to C here, so a later answer is rejected and a later deadline is a no-op).
# ARGV: run_id, event_data, now_ms, retention_seconds
CANCEL = (
    _UNWAIT
    + _CLOSE_PENDING_HOOKS
    + """
local run = KEYS[1]
local rs = redis.call('HMGET', run, 'status', 'msg', 'dl', 'session')
local s = rs[1]
if not s then return {'no_run'} end
if s == 'completed' or s == 'failed' or s == 'cancelled' then return {'finished', s} end
redis.call('HINCRBY', run, 'fence', 1)
redis.call('HSET', run, 'status', 'cancelled', 'ended', ARGV[3])
if s == 'suspended' then redis.call('HINCRBY', KEYS[8], 'suspended', -1) end
redis.call('HINCRBY', KEYS[8], 'cancelled', 1)
redis.call('HDEL', run, 'owner', 'lease', 'msg', 'dl')
if rs[2] then
  redis.call('XACK', KEYS[5], 'workers', rs[2])
  redis.call('XDEL', KEYS[5], rs[2])
end
if rs[3] then redis.call('ZREM', KEYS[6], rs[3]) end
local closed = close_pending_hooks(KEYS[3], KEYS[7], KEYS[6], ARGV[1])
redis.call('DEL', KEYS[4])
redis.call('XADD', KEYS[2], '*', 't', 'workflow.cancelled', 'd', ARGV[2])
redis.call('HINCRBY', run, 'nev', 1)
local ttl = tonumber(ARGV[4])
redis.call('EXPIRE', run, ttl)
redis.call('EXPIRE', KEYS[2], ttl)
redis.call('EXPIRE', KEYS[3], ttl)
if rs[4] and rs[4] ~= '' then
  local prefix = string.gsub(KEYS[6], 'deadlines$', '')
  local outbox = prefix .. 'session:' .. rs[4] .. ':outbox'
  redis.call('XADD', outbox, 'MAXLEN', '~', 10000, '*', 'm',
    '{"type":"status","status":"cancelled","run_id":"' .. ARGV[1] .. '"}')
  local left = tonumber(redis.call('HGET', prefix .. 'waiting', rs[4]) or '0')
  if closed > 0 then left = unwait(prefix .. 'waiting', rs[4], closed) end
  if left <= 0 then redis.call('EXPIRE', outbox, ttl) end
end
return {'ok'}
"""
)

# Extend the lease of a long execution and reset its task's idle time, so XAUTOCLAIM does
# not hand a live worker's run to another worker. Race closed: a heartbeat from a worker
# that already lost the run (fence moved) must not extend the new owner's lease.
# ARGV: fence, lease_until_ms, consumer
HEARTBEAT = """
if redis.call('HGET', KEYS[1], 'fence') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'lease', ARGV[2])
local msg = redis.call('HGET', KEYS[1], 'msg')
if msg then redis.call('XCLAIM', KEYS[2], 'workers', ARGV[3], 0, msg, 'JUSTID') end
return 1
"""

# Create a run: hash, first event and task in one step. Race closed: a crash between
# writing the run and enqueueing it would leave a run no worker ever picks up.
# ARGV: run_id, workflow, session, now_ms, started_event_data
START = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'status', 'pending', 'wf', ARGV[2], 'created', ARGV[4],
  'fence', 0, 'nev', 1)
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'session', ARGV[3]) end
redis.call('XADD', KEYS[2], '*', 't', 'workflow.started', 'd', ARGV[5])
redis.call('XADD', KEYS[3], '*', 'r', ARGV[1], 'w', ARGV[2])
redis.call('HINCRBY', KEYS[4], 'started', 1)
return 1
"""

# Read a run's status, output and last event id at one instant, so `Runtime.wait` can block
# on the events stream from that id without missing the event that finishes the run.
# (A script rather than MULTI: the same code runs on Redis Cluster.)
WAIT_STATE = """
local rs = redis.call('HMGET', KEYS[1], 'status', 'out')
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
return {rs[1] or '', rs[2] or '', last[1] and last[1][1] or '0-0'}
"""
