-- Move a failed entry to its stream's delayed-retry set and acknowledge it, in one step.
--
-- One step, so that a crash can neither lose the event (acked but never scheduled) nor run it
-- twice (scheduled, yet still pending and so reclaimed). The entry must still be pending for
-- this consumer: if its lease expired and another consumer claimed it, that consumer now owns
-- the outcome and this call does nothing. The member is the full field list (msgpack), with
-- `_retries` set to the new count and `_group` naming the only group that should see the retry;
-- being a pure function of the event, a second identical call cannot schedule it twice.
--
-- KEYS[1] stream, KEYS[2] retry sorted set
-- ARGV[1] group, ARGV[2] entry id, ARGV[3] consumer, ARGV[4] delay (ms),
-- ARGV[5] the retry count the re-added entry carries, ARGV[6..] original fields as name/value pairs
-- Returns the due time (ms, server clock), or false when the entry is no longer ours.
local stream, zset = KEYS[1], KEYS[2]
local group, id, consumer = ARGV[1], ARGV[2], ARGV[3]

local owner = redis.call('XPENDING', stream, group, id, id, 1)
if #owner == 0 or owner[1][2] ~= consumer then
  return false
end

local fields = {}
for i = 6, #ARGV, 2 do
  local name = ARGV[i]
  if name ~= '_retries' and name ~= '_group' then
    fields[#fields + 1] = name
    fields[#fields + 1] = ARGV[i + 1]
  end
end
fields[#fields + 1] = '_retries'
fields[#fields + 1] = ARGV[5]
fields[#fields + 1] = '_group'
fields[#fields + 1] = group

local t = redis.call('TIME')
local due = t[1] * 1000 + math.floor(t[2] / 1000) + tonumber(ARGV[4])
redis.call('ZADD', zset, string.format('%d', due), cmsgpack.pack(fields))
redis.call('XACK', stream, group, id)
return due
