-- Tags (search attributes): each partition keeps a sorted set per tag (key_tag, scored by
-- the run's creation ms) of its runs that have it. These helpers are called by the scripts
-- that start a run (start, restart), change its tags (apply's 'tags' op) and end it
-- (end_run: apply, cancel), in the same script as the change, so a run is listed under
-- exactly the tags its hash holds. An ended run stays listed until its keys expire: it is
-- noted in key_tag_ends with that instant, and the writes of tagged runs drop the expired
-- ones from the index (TAG_PRUNE_LIMIT per write). Untagged runs never call these.

local function tag_name(key, value)
  return key .. TAG_SEP .. value
end

-- The tags of a later run of `run_id`, as a set of names: none when the id's hash is gone
-- or expires now (the ended run itself). Race closed: an id is free again once its run's
-- keys expired; a new run of it was indexed under its tags, and pruning the earlier run
-- removed the id from those same tags: the new run was missing from every listing by tag.
local function later_run_tags(prefix, run_id)
  local run_key = key_run(prefix, run_id)
  local ttl = redis.call('PTTL', run_key)
  local names = {}
  if ttl == -1 or ttl > 0 then
    local tags_json = redis.call('HGET', run_key, 'tags')
    if tags_json then
      for key, value in pairs(cjson.decode(tags_json)) do names[tag_name(key, value)] = true end
    end
  end
  return names
end

-- Drop from the index up to TAG_PRUNE_LIMIT ended runs whose keys have expired by `now`.
local function prune_tags(prefix, now)
  local ends = key_tag_ends(prefix)
  local gone = redis.call('ZRANGEBYSCORE', ends, '-inf', now, 'LIMIT', 0, TAG_PRUNE_LIMIT)
  for _, member in ipairs(gone) do
    local run_id, kept = nil, nil
    for part in string.gmatch(member, '[^' .. TAG_LIST_SEP .. ']+') do
      if run_id == nil then
        run_id = part
        kept = later_run_tags(prefix, run_id)
      elseif not kept[part] then
        redis.call('ZREM', key_tag(prefix, part), run_id)
      end
    end
    redis.call('ZREM', ends, member)
  end
end

-- A new run's tags (`tags_json`: a JSON object): recorded in its hash and indexed.
local function index_tags(prefix, run_key, run_id, created, tags_json)
  redis.call('HSET', run_key, 'tags', tags_json)
  for key, value in pairs(cjson.decode(tags_json)) do
    redis.call('ZADD', key_tag(prefix, tag_name(key, value)), created, run_id)
  end
  prune_tags(prefix, created)
end

-- Replace a run's tags (`old_json`, false when it had none) with `new_json`: the index
-- loses the pairs it no longer has and gains the new ones. Returns the new tags' JSON, or
-- false when none is left.
local function retag(prefix, run_key, run_id, old_json, new_json, now)
  local old = old_json and cjson.decode(old_json) or {}
  local new = cjson.decode(new_json)
  local created = redis.call('HGET', run_key, 'created') or now
  for key, value in pairs(old) do
    if new[key] ~= value then redis.call('ZREM', key_tag(prefix, tag_name(key, value)), run_id) end
  end
  for key, value in pairs(new) do
    if old[key] ~= value then
      redis.call('ZADD', key_tag(prefix, tag_name(key, value)), created, run_id)
    end
  end
  prune_tags(prefix, now)
  if next(new) == nil then
    redis.call('HDEL', run_key, 'tags')
    return false
  end
  redis.call('HSET', run_key, 'tags', new_json)
  return new_json
end

-- A tagged run ended: it leaves the index when its keys expire (`ttl` seconds from `now`).
local function tags_ended(prefix, run_id, tags_json, now, ttl)
  local tags = cjson.decode(tags_json)
  local names = {}
  for key, value in pairs(tags) do names[#names + 1] = tag_name(key, value) end
  if #names == 0 then return end
  table.sort(names)
  local member = run_id .. TAG_LIST_SEP .. table.concat(names, TAG_LIST_SEP)
  redis.call('ZADD', key_tag_ends(prefix), tonumber(now) + ttl * 1000, member)
  prune_tags(prefix, now)
end
