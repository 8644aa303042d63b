-- Prepended to the replay scripts (see _common._source); defines one function.
--
-- XADD a copy of an entry (its flat field list) to target under a new ID, with _replayed_from set to
-- the original ID (an earlier _replayed_from of a copy of a copy is replaced, not repeated).
local function add_copy(target, id, fields)
  local args = {'XADD', target, '*'}
  for f = 1, #fields, 2 do
    if fields[f] ~= '_replayed_from' then
      args[#args + 1] = fields[f]
      args[#args + 1] = fields[f + 1]
    end
  end
  args[#args + 1] = '_replayed_from'
  args[#args + 1] = id
  redis.call(unpack(args))
end
