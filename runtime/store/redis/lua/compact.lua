-- COMPACT: replace ended runs' event streams and hooks hashes by one compressed segment
-- holding them all (built by the worker, runtime/store/redis/_archive.py: Lua has no
-- zlib), and drop what is left of their checkpoints: well under 0.1 KB of Redis per run
-- for the retention instead of ~5 KB.
-- Race closed: a run's log or hooks changing between the read its document was made from
-- and this swap (a late event, a run that is no longer ended), or a second compaction
-- whose read raced the first (its log read before the swap, its hooks after: none): a run
-- is swapped only while it is ended and its log's length and its hooks' count are the
-- ones its document was made from. A log only grows while it exists (every event is
-- appended, none removed) and a compacted run has none left, so either changes when
-- anything does; otherwise nothing of the run changes and it stays readable as it is.
-- (An ended run's hooks do not change: every script that writes a hook checks first that
-- its run has not ended.) A run refused here stays in the segment's blob, unnamed by its
-- hash and never read from it: a later compaction puts it in a segment of its own.
-- Race closed: a segment expiring before one of its runs, whose hash would then name a
-- segment that is gone: it expires with the last of the runs it took (end_run set their
-- expiry), or never if one of them never does.
-- KEYS: the segment's key. The runs' keys share its partition's prefix and are built from
-- it here (as lua/lib.lua's run_keys does): four fewer arguments a run to encode and send.
-- ARGV: the segment's id, its blob, then per run: its id, the log's last id, its length,
-- the hooks hash's field count.
-- Returns how many runs were compacted.
local segment, segment_id = KEYS[1], ARGV[1]
local _, prefix_end = string.find(segment, PARTITION_PREFIX_END, 1, true)
local prefix = string.sub(segment, 1, prefix_end)
-- The runs to swap first, then the segment, then the swaps: a SET that fails (the server
-- refusing it) leaves no hash naming a segment that was not written.
local swapped, longest, forever = {}, 0, false
for r = 0, (#ARGV - 2) / 4 - 1 do
  local run_id, last_id = ARGV[4 * r + 3], ARGV[4 * r + 4]
  local length, nhooks = tonumber(ARGV[4 * r + 5]), tonumber(ARGV[4 * r + 6])
  local run, events = key_run(prefix, run_id), key_events(prefix, run_id)
  local hooks = key_hooks(prefix, run_id)
  local status = redis.call('HGET', run, 'status')
  if status and FINISHED[status] and redis.call('XLEN', events) == length
      and redis.call('HLEN', hooks) == nhooks then
    local ttl = redis.call('PTTL', run)
    if ttl == -1 then forever = true elseif ttl > longest then longest = ttl end
    swapped[#swapped + 1] = {run, events, hooks, key_ckpt(prefix, run_id), last_id}
  end
end
if #swapped == 0 then return 0 end
if forever then
  redis.call('SET', segment, ARGV[2])
else
  -- at least 1 ms: a run in its last millisecond has a PTTL of 0, which PX refuses.
  -- (As a string: a Lua number is formatted per call; '%.0f', not '%d', a C long that is
  -- 32 bits on Windows, where the embedded store may run.)
  redis.call('SET', segment, ARGV[2], 'PX', string.format('%.0f', math.max(longest, 1)))
end
for _, run in ipairs(swapped) do
  -- 'last': what lua/wait_state.lua reports as the run's last event id once the stream is
  -- gone
  redis.call('HSET', run[1], 'last', run[5], 'archive', segment_id)
  redis.call('DEL', run[2], run[3], run[4])
end
return #swapped
