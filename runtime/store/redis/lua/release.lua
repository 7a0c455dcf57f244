-- RELEASE: give back the lease a claim took for an execution that will not run (the run's
-- log is of a form this worker cannot replay): the run is pending again, free for the next
-- claim, and, if that claim was its first, bound to no worker's version.
-- Race closed: a run refused by a worker of an older Parley was recorded as that worker's
-- version by its claim, and a worker of the version that can run it parked it for good.
-- ARGV: fence, '1' to forget the version the claim recorded. Returns 1, or 0 (the lease
-- had moved on: nothing changed).
local keys = run_keys()
if redis.call('HGET', keys.run, 'fence') ~= ARGV[1] then return 0 end
redis.call('HSET', keys.run, 'status', STATUS.pending)
redis.call('HDEL', keys.run, 'lease', 'owner')
if ARGV[2] == '1' then redis.call('HDEL', keys.run, 'ver') end
return 1
