-- COMPACT: replace an ended run's event stream and hooks hash by one compressed blob (the
-- worker builds it, runtime/store/redis/_archive.py: Lua has no zlib), and drop whatever
-- is left of its checkpoints: ~0.7 KB of Redis for the retention instead of ~5 KB.
-- Race closed: the log or the hooks changing between the read the blob was made from and
-- this swap (a late event, a second compaction, a run that is no longer ended): the swap
-- happens only while the run is ended, has no archive yet, and its log's last id and
-- length and its hooks' count are the ones the blob was made from; otherwise nothing
-- changes and the run stays readable as it is. (An ended run's hooks do not change:
-- every script that writes a hook checks first that its run has not ended.)
-- KEYS: the run's keys (run_keys order), then its archive.
-- ARGV: the log's last id, its length, the hooks hash's field count, the blob.
-- Returns 1 (compacted) | 0 (nothing done).
local keys = run_keys()
local archive = KEYS[9]
local status = redis.call('HGET', keys.run, 'status')
if not status or not FINISHED[status] then return 0 end
if redis.call('EXISTS', archive) == 1 then return 0 end
local last = redis.call('XREVRANGE', keys.events, '+', '-', 'COUNT', 1)
if not last[1] or last[1][1] ~= ARGV[1] then return 0 end
if redis.call('XLEN', keys.events) ~= tonumber(ARGV[2]) then return 0 end
if redis.call('HLEN', keys.hooks) ~= tonumber(ARGV[3]) then return 0 end
redis.call('SET', archive, ARGV[4])
-- what lua/wait_state.lua reports as the run's last event id once the stream is gone
redis.call('HSET', keys.run, 'last', ARGV[1])
-- expires with the run's other keys (end_run set their expiry)
local ttl = redis.call('PTTL', keys.run)
if ttl > 0 then redis.call('PEXPIRE', archive, ttl) end
redis.call('DEL', keys.events, keys.hooks, keys.ckpt)
return 1
