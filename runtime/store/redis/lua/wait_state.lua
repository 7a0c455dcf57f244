-- WAIT_STATE: a run's status, output and last event id at one instant, so a waiter can
-- block on the event stream from that id without missing the event that ends the run.
-- (A script rather than MULTI: the same code runs on Redis Cluster.)
local keys = run_keys()
-- (A compacted run, lua/compact.lua, has no stream: its hash keeps its last event's id.)
local rs = redis.call('HMGET', keys.run, 'status', 'out', 'last')
local last = redis.call('XREVRANGE', keys.events, '+', '-', 'COUNT', 1)
return {rs[1] or '', rs[2] or '', last[1] and last[1][1] or rs[3] or '0-0'}
