-- Prepended to the scripts that write a batch's leases or records (move_add.lua, and a caller's own
-- bulk requeue script read through eventbus.scripts.source) by eventbus.scripts.source; defines one function.
--
-- hset_many(key, pairs): HSET of many fields at once. A new hash is built as a listpack until it holds
-- more than hash-max-listpack-entries fields, each field a linear search of it: for a batch's thousand
-- leases or records that is quadratic (6 us a field at 512, ten times a hash table's cost). A value
-- longer than hash-max-listpack-value makes HSET turn the hash into a table before it inserts anything,
-- so one such field rides along and is dropped again.
local function hset_many(key, pairs)
  if #pairs > 256 then
    pairs[#pairs + 1] = 'eventbus:as-table'
    pairs[#pairs + 1] = string.rep('-', 4096)
    redis.call('HSET', key, unpack(pairs))
    redis.call('HDEL', key, 'eventbus:as-table')
  else
    redis.call('HSET', key, unpack(pairs))
  end
end

