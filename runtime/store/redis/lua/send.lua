-- SEND: a message to a run. If the run waits for a message of this topic, it goes to the
-- run's log (and wakes it); else it waits in the run's inbox until a receive takes it.
-- Races closed: a send vs. the suspension of a receive (the suspension takes what the
-- inbox holds in the same step as it sets the run waiting, and this step checks the flag
-- that suspension set): a message is received once, never lost; a send vs. the end of
-- the run (status checked here); a send vs. continue_as_new (below).
-- KEYS: the run's hash (see run_keys), then its inbox.
-- ARGV: run id, topic, message event data ({"topic", "payload"}).
-- Returns {'delivered'} | {'buffered'} | {'no_run'} | {'finished', status}.
local keys = run_keys()
local inbox = KEYS[2]
local run_id, topic, data = ARGV[1], ARGV[2], ARGV[3]
local rs = redis.call('HMGET', keys.run, 'status', 'wf', 'recv:' .. topic, 'chain_head')
local status = rs[1]
if not status then return {'no_run'} end
-- A run that continued as new hands the message on to the run its chain has reached: a
-- sender holding the conversation's first id (a webhook, say) keeps reaching it, as
-- Runtime.wait follows the chain. Race closed: a message sent as the run continued was
-- refused ('finished') though the conversation went on. The successors share this
-- partition, so their keys derive here. The first run's 'chain_head' remembers the
-- farthest run reached, so a long chain is walked once, not on every send: a hint only
-- (a later run of the chain ended after this one, so it is kept at least as long).
if status == STATUS.continued then
  local origin, hops = keys.run, 0
  local next_id = rs[4] or redis.call('HGET', keys.run, 'continued_to')
  while status == STATUS.continued and next_id and hops < 10000 do
    run_id = next_id
    keys.run = key_run(keys.prefix, run_id)
    rs = redis.call('HMGET', keys.run, 'status', 'wf', 'recv:' .. topic, 'continued_to')
    status, next_id, hops = rs[1], rs[4], hops + 1
  end
  if not status then return {'no_run'} end
  if hops > 1 then redis.call('HSET', origin, 'chain_head', run_id) end
  keys.events = key_events(keys.prefix, run_id)
  inbox = key_inbox(keys.prefix, run_id)
end
if FINISHED[status] then return {'finished', status} end
if not rs[3] then
  redis.call('XADD', inbox, '*', 't', topic, 'd', data)
  return {'buffered'}
end
redis.call('HDEL', keys.run, 'recv:' .. topic)
append_event(keys.run, keys.events, EVENT.message_received, data)
if status == STATUS.suspended then
  redis.call('HSET', keys.run, 'status', STATUS.pending)
  redis.call('HINCRBY', keys.stats, STATUS.suspended, -1)
  enqueue(keys.tasks, run_id, rs[2])
end
return {'delivered'}
