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
-- ARGV[1] record TTL in ms, then per entry: DLQ entry ID, N, then N field/value args
-- Returns one reply per entry: its new ID (just added or recorded before), or "!" .. Redis's error.
local target, record = KEYS[1], KEYS[2]
local ids, starts = {}, {}
local i, n = 2, #ARGV
while i <= n do
  ids[#ids + 1] = ARGV[i]
  starts[#starts + 1] = i
  i = i + 2 + tonumber(ARGV[i + 1])
end
local out, recorded = {}, {}
if #ids > 0 then
  local known = redis.call('HMGET', record, unpack(ids))
  for e = 1, #ids do
    local at = starts[e]
    if known[e] then
      out[e] = known[e]
    else
      local new_id = redis.pcall('XADD', target, '*', unpack(ARGV, at + 2, at + 1 + tonumber(ARGV[at + 1])))
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
  redis.call('HSET', record, unpack(recorded))
end
redis.call('PEXPIRE', record, ARGV[1])
return out
