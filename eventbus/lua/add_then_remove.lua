-- Prepended to the scripts that move one item into a stream (requeue.lua, and a caller's own scripts
-- read through eventbus.scripts.source) by eventbus.scripts.source; defines one function.
--
-- add_then_remove(target, args, first, last, remove, key, member): XADD args[first..last] (field/value
-- pairs) to target under a new ID and, only when Redis took it, remove the item where it came from
-- (redis.call(remove, key, member): XDEL of a dead letter, ZREM of a delayed retry). XADD runs under
-- pcall and before the removal: when the target refuses (WRONGTYPE, OOM) the item stays where it was.
-- Nothing is ever removed without a copy. Returns the new entry's ID, or "!" followed by Redis's error.
local function add_then_remove(target, args, first, last, remove, key, member)
  local new_id = redis.pcall('XADD', target, '*', unpack(args, first, last))
  if type(new_id) == 'table' and new_id.err then
    return '!' .. new_id.err
  end
  redis.call(remove, key, member)
  return new_id
end

