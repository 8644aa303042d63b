-- Re-publish one batch of a stream range as copies, and record how far the job got, atomically.
--
-- The copies, the cursor and the count of copies move together: a job killed at any point either
-- did a whole batch (and its cursor and count say so) or none of it. Resuming always starts after
-- the furthest of the Redis-side cursor and the caller's own, so a caller that lost its last save
-- cannot copy a batch twice, and the count kept here is what the job made, whatever it saved.
--
-- Copies get new IDs ('*'), the original's fields except an earlier _replayed_from, and
-- _replayed_from=<original ID>. The range end is a concrete ID fixed when the job started: when
-- the target is the source, copies land after it and are never replayed themselves.
--
-- KEYS[1] source stream, KEYS[2] target stream, KEYS[3] (optional) cursor key (a string),
-- KEYS[4] (optional, with KEYS[3]) count key: copies made under this cursor so far (an integer)
-- ARGV[1] first ID (inclusive), ARGV[2] caller's cursor ('' for none; exclusive),
-- ARGV[3] last ID (inclusive), ARGV[4] COUNT, ARGV[5] cursor TTL in ms,
-- ARGV[6..] field/value pairs an entry must all hold to be copied
-- Returns {copied, entries read, ID of the last entry read or false, 1 if the range is done else 0,
-- copies counted under the count key after this batch (or this batch's copies without one),
-- {first source ID copied, last, first copy's ID, last copy's} or {} when nothing was copied}: the
-- batch's copies are contiguous in the target (this one script adds them), so the job's audit row
-- can say where each source entry's copy is.
local source, target, cursor_key, count_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local first, after, last_id, count, ttl = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]

if cursor_key then
  local stored = redis.call('GET', cursor_key)
  if stored and (after == '' or less(after, stored)) then
    after = stored
  end
end
if after ~= '' and not less(after, last_id) then
  local counted = 0
  if count_key then counted = tonumber(redis.call('GET', count_key) or '0') end
  return {0, 0, after, 1, counted, {}}
end

local from = first
if after ~= '' and less(first, after) or after == first then
  from = '(' .. after
end
local entries = redis.call('XRANGE', source, from, last_id, 'COUNT', count)
local copied, span = 0, {}
for e = 1, #entries do
  local id, fields = entries[e][1], entries[e][2]
  if holds_all(fields, 6) then
    local copy = add_copy(target, id, fields)
    if copied == 0 then span = {id, id, copy, copy} end
    span[2], span[4] = id, copy
    copied = copied + 1
  end
end

local done = #entries < tonumber(count)
local reached = after
if #entries > 0 then
  reached = entries[#entries][1]
  if reached == last_id then done = true end
end
if done then reached = last_id end
local counted = copied
if cursor_key then
  redis.call('SET', cursor_key, reached, 'PX', ttl)
end
if count_key then
  counted = redis.call('INCRBY', count_key, copied)
  redis.call('PEXPIRE', count_key, ttl)
end
return {copied, #entries, reached, done and 1 or 0, counted, span}
