-- COMPACT: replace ended runs' event streams and hooks hashes by one compressed blob each
-- (built by the worker, runtime/store/redis/_archive.py: Lua has no zlib), and drop what
-- is left of their checkpoints: ~0.6 KB of Redis per run for the retention instead of ~5 KB.
-- Race closed: a run's log or hooks changing between the read its blob was made from and
-- this swap (a late event, a run that is no longer ended), or a second compaction whose
-- read raced the first (its log read before the swap, its hooks after: none): a run is
-- swapped only while it is ended and its log's length and its hooks' count are the ones
-- its blob was made from. A log only grows while it exists (every event is appended, none
-- removed) and a compacted run has none left, so either changes when anything does;
-- otherwise nothing of the run changes and it stays readable as it is. (An ended run's
-- hooks do not change: every script that writes a hook checks first that its run has not
-- ended.)
-- KEYS: per run (all in one partition): its hash, events, hooks, checkpoints, archive.
-- ARGV: per run: the log's last id, its length, the hooks hash's field count, the blob.
-- Returns how many runs were compacted.
local done = 0
for r = 0, #KEYS / 5 - 1 do
  local run, events, hooks, ckpt, archive = KEYS[5 * r + 1], KEYS[5 * r + 2], KEYS[5 * r + 3],
    KEYS[5 * r + 4], KEYS[5 * r + 5]
  local last_id, length, nhooks = ARGV[4 * r + 1], tonumber(ARGV[4 * r + 2]),
    tonumber(ARGV[4 * r + 3])
  local status = redis.call('HGET', run, 'status')
  if status and FINISHED[status] and redis.call('XLEN', events) == length
      and redis.call('HLEN', hooks) == nhooks then
    -- expires with the run's other keys (end_run set their expiry)
    -- (as a string: a Lua number is formatted per call; '%.0f', not '%d', a C long that
    -- is 32 bits on Windows, where the embedded store may run)
    local ttl = redis.call('PTTL', run)
    if ttl > 0 then
      redis.call('SET', archive, ARGV[4 * r + 4], 'PX', string.format('%.0f', ttl))
    else
      redis.call('SET', archive, ARGV[4 * r + 4])
    end
    -- what lua/wait_state.lua reports as the run's last event id once the stream is gone
    redis.call('HSET', run, 'last', last_id)
    redis.call('DEL', events, hooks, ckpt)
    done = done + 1
  end
end
return done
