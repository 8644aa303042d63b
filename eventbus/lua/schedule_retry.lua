-- Move a failed entry to its stream's delayed-retry set and acknowledge it, in one step.
--
-- One step, so that a crash can neither lose the event (acked but never scheduled) nor run it
-- twice (scheduled, yet still pending and so reclaimed). The entry must still be pending for
-- this consumer: if its lease expired and another consumer claimed it, that consumer now owns
-- the outcome and this call does nothing. The member is the full field list (msgpack), with
-- `_retries` set to the new count and `_group` naming the only group that should see the retry.
-- It also records where the event has been (eventbus/keys.py), since each retry is a new entry:
-- `_first_id`, the entry ID of the first publish (kept when the entry carries it already, else this
-- entry); `_failed_id`, this entry, whose failure the worker wrote to the metric events with the
-- same entry_id; and `_failed_at`, the server's clock now, so a reader finds that metric event by
-- its time instead of reading the whole metrics stream. The check that the entry is still pending
-- and its XACK run in this one script, so a second call for the same failure finds it acked.
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
local first = id
for i = 6, #ARGV, 2 do
  local name = ARGV[i]
  if name == '_first_id' then
    first = ARGV[i + 1]
  elseif name ~= '_retries' and name ~= '_group' and name ~= '_failed_id' and name ~= '_failed_at' then
    fields[#fields + 1] = name
    fields[#fields + 1] = ARGV[i + 1]
  end
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local due = now + tonumber(ARGV[4])
for _, pair in ipairs({
  {'_retries', ARGV[5]}, {'_group', group}, {'_first_id', first}, {'_failed_id', id},
  {'_failed_at', string.format('%d', now)},
}) do
  fields[#fields + 1] = pair[1]
  fields[#fields + 1] = pair[2]
end

redis.call('ZADD', zset, string.format('%d', due), cmsgpack.pack(fields))
redis.call('XACK', stream, group, id)
return due
