-- RECLAIM: take over the tasks idle longer than the visibility timeout (their worker
-- died) in one or more partitions' task streams: all of a single Redis in one call, so an
-- idle worker's periodic check costs one command whatever the number of partitions (one
-- per call on a cluster). Nothing to close beyond XAUTOCLAIM's own atomicity: this script
-- only batches it.
-- KEYS: the task streams. ARGV: consumer, idle ms, count, then a start id per stream.
-- Returns for each stream {next start id ('0-0': done), {{id, {field, value, ...}}, ...}}.
local consumer, idle, count = ARGV[1], ARGV[2], ARGV[3]
local replies = {}
for i = 1, #KEYS do
  local reply = redis.call('XAUTOCLAIM', KEYS[i], GROUP, consumer, idle, ARGV[i + 3],
    'COUNT', count)
  replies[i] = {reply[1], reply[2]}
end
return replies
