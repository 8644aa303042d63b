-- Delete one batch of the oldest entries, never any newer than a given ID.
--
-- Reading and deleting in one script keeps the entries' fields inside Redis (a purge moves only
-- counts over the network) and bounds the time Redis is blocked to one batch.
--
-- KEYS[1] stream; ARGV[1] the newest ID that may be deleted; ARGV[2] batch size
-- Returns {entries deleted, ID of the last one deleted or false}.
local entries = redis.call('XRANGE', KEYS[1], '-', ARGV[1], 'COUNT', ARGV[2])
if #entries == 0 then
  return {0, false}
end
local ids = {}
for e = 1, #entries do
  ids[e] = entries[e][1]
end
local deleted = redis.call('XDEL', KEYS[1], unpack(ids))
return {deleted, ids[#ids]}
