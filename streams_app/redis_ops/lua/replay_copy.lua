-- Replay across slots: add one batch of copies, read from a source stream on another node, to the
-- target, and advance the job's cursor and count of copies in the same step.
--
-- replay.lua reads, copies and moves the cursor in one script when the source, the target and the
-- cursor share a slot. When the source is elsewhere the caller reads the batch (a read is harmless to
-- repeat) and hands it here, to the target's slot, where the cursor and the count live: the copies,
-- the cursor and the count still move together, so a job killed at any point either did a whole
-- batch (and its cursor and count say so) or none of it. Entries at or before the stored cursor are
-- skipped: a caller that read a batch before another run of the same job finished it copies nothing
-- twice.
--
-- KEYS[1] target stream, KEYS[2] (optional) cursor key, KEYS[3] (optional, with KEYS[2]) count key,
-- all in the target's slot
-- ARGV[1] ID the cursor moves to (the last entry read, or the range's end when it is done),
-- ARGV[2] cursor TTL in ms, ARGV[3] E, ARGV[4..3+E] per entry read: its ID, N, then N field/value
-- args; ARGV[4+E..] field/value pairs an entry must all hold to be copied (holds_all, prepended)
-- Returns {copies added, copies counted under the count key after this batch (or this batch's),
-- {first source ID copied, last, first copy's ID, last copy's} or {} (see replay.lua)}.
local target, cursor_key, count_key = KEYS[1], KEYS[2], KEYS[3]
local reached, ttl, entries_end = ARGV[1], ARGV[2], 3 + tonumber(ARGV[3])

local stored = false
if cursor_key then stored = redis.call('GET', cursor_key) end
local copied, span = 0, {}
local i, n = 4, entries_end
while i <= n do
  local id = ARGV[i]
  local last = i + 1 + tonumber(ARGV[i + 1])
  if not (stored and not less(stored, id)) then
    local fields = {unpack(ARGV, i + 2, last)}
    if holds_all(fields, entries_end + 1) then
      local copy = add_copy(target, id, fields)
      if copied == 0 then span = {id, id, copy, copy} end
      span[2], span[4] = id, copy
      copied = copied + 1
    end
  end
  i = last + 1
end
local counted = copied
if cursor_key and not (stored and not less(stored, reached)) then
  redis.call('SET', cursor_key, reached, 'PX', ttl)
end
if count_key then
  counted = redis.call('INCRBY', count_key, copied)
  redis.call('PEXPIRE', count_key, ttl)
end
return {copied, counted, span}
