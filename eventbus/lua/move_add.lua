-- Cross-slot requeue, step 2 of 4 (see eventbus/moves.py): add leased dead letters to their target,
-- each at most once, remembering each one's new ID in the target's slot.
--
-- The record (DLQ entry ID -> new entry ID) is what makes a repeated step 2 harmless: a mover killed
-- after this script and before the DLQ's XDEL runs it again on resume and gets the recorded IDs back
-- instead of adding copies. The record is written in the same script as the XADD, so there is no
-- moment with a copy and no record. XADD runs under pcall: a refused entry gets no record and its
-- dead letter stays in the DLQ.
--
-- KEYS[1] the target stream; KEYS[2] the record hash for this DLQ, in the target's slot
-- ARGV[1] record TTL in ms, ARGV[2] how the entries come:
--   'flat': ARGV[3..], per entry: DLQ entry ID, N, then N field/value args;
--   'packed': ARGV[3], one MessagePack array holding per entry {DLQ entry ID, field, value, ...}, as
--   a caller's bulk script (one that leases inside its own batch, eventbus/moves.py) hands a batch back for
--   the client to pass on unread: one argument per batch instead of one per field and value saves
--   the client and both servers most of the per-entry work of a move across slots. (One string per
--   batch, not per entry: Lua 5.1 hashes a long string by sampling it, and a thousand lookalike
--   entries packed one by one would all land in one bucket of its string table.)
-- Returns one reply per entry: its new ID (just added or recorded before), or "!" .. Redis's error.
-- hset_many(key, pairs): eventbus/lua/hset_many.lua, prepended when the source is read.
local target, record = KEYS[1], KEYS[2]
local ids, fields = {}, {} -- per entry: its DLQ ID, and a function giving its field/value args
if ARGV[2] == 'packed' then
  local batch = cmsgpack.unpack(ARGV[3])
  for e = 1, #batch do
    local entry = batch[e]
    ids[e] = entry[1]
    fields[e] = function() return unpack(entry, 2) end
  end
else
  local i, n = 3, #ARGV
  while i <= n do
    local at, count = i, tonumber(ARGV[i + 1])
    ids[#ids + 1] = ARGV[i]
    fields[#fields + 1] = function() return unpack(ARGV, at + 2, at + 1 + count) end
    i = i + 2 + count
  end
end
local out, recorded = {}, {}
if #ids > 0 then
  local known = redis.call('HMGET', record, unpack(ids))
  for e = 1, #ids do
    if known[e] then
      out[e] = known[e]
    else
      local new_id = redis.pcall('XADD', target, '*', fields[e]())
      if type(new_id) == 'table' and new_id.err then
        out[e] = '!' .. new_id.err
      else
        recorded[#recorded + 1] = ids[e]
        recorded[#recorded + 1] = new_id
        out[e] = new_id
      end
    end
  end
end
if #recorded > 0 then
  hset_many(record, recorded)
end
redis.call('PEXPIRE', record, ARGV[1])
return out
