-- Take delayed retries of the event bus out of their sorted set, each one as one step: re-add it to
-- its stream now, file it in the dead-letter stream, or drop it.
--
-- A member is named by its due time (its score) and the SHA-1 of its bytes (the bus's members are
-- msgpack field lists, up to a payload's size: too big to post back from a page). The member is
-- looked up among those due at that very millisecond, and found, used and removed inside this one
-- script; the bus's own pump (eventbus/lua/pump_retries.lua) also re-adds and removes a member in one
-- script, so whichever of the two runs first moves it and the other finds it gone: one copy, never
-- two, never none.
--
-- 'stream' adds the member's own fields, unpacked exactly as pump_retries.lua does (no MAXLEN: the
-- console does not know the workers' setting; their next XADD trims). 'dlq' adds the fields given
-- here (the bus's dead-letter fields, planned by the caller from the member) followed by
-- dlq_failed_at on the server clock, as eventbus/lua/dead_letter.lua does. XADD runs under pcall and
-- before ZREM (add_then_remove, eventbus/lua/add_then_remove.lua, prepended when the source is read, as
-- requeue.lua moves a dead letter): a refused XADD leaves the member where it was and says why.
--
-- KEYS[1] the retry sorted set; KEYS[2] the stream or dead-letter stream ('stream' and 'dlq' only;
--   on a cluster it must share KEYS[1]'s slot, as the bus's names do)
-- ARGV[1] 'stream', 'dlq' or 'delete'
-- ARGV[2..], per member: due time (ms), SHA-1 (hex) of the member, N, then N field/value args ('dlq')
-- Returns one reply per member, in order: the new entry's ID ('stream', 'dlq') or 1 ('delete');
-- false when the member is no longer in the set; '!' followed by Redis's error when XADD refused.
local zset, mode = KEYS[1], ARGV[1]
-- Members due at one millisecond compared at most: a burst of failures in one millisecond is far
-- smaller, and the bound keeps one call's work bounded whatever the set holds.
local SAME_MS = 1000
local out = {}
local i, n = 2, #ARGV
while i <= n do
  local due, sha = ARGV[i], ARGV[i + 1]
  local last = i + 2 + tonumber(ARGV[i + 2])
  local found = nil
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', zset, due, due, 'LIMIT', 0, SAME_MS)) do
    if redis.sha1hex(member) == sha then
      found = member
      break
    end
  end
  if not found then
    out[#out + 1] = false
  elseif mode == 'delete' then
    redis.call('ZREM', zset, found)
    out[#out + 1] = 1
  else
    local fields
    if mode == 'stream' then
      fields = cmsgpack.unpack(found)
    else
      fields = {unpack(ARGV, i + 3, last)}
      local t = redis.call('TIME')
      fields[#fields + 1] = 'dlq_failed_at'
      fields[#fields + 1] = string.format('%d', t[1] * 1000 + math.floor(t[2] / 1000))
    end
    out[#out + 1] = add_then_remove(KEYS[2], fields, 1, #fields, 'ZREM', zset, found)
  end
  i = last + 1
end
return out
