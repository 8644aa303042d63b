-- Prepended to the replay scripts (see _common._source); defines two functions.
--
-- less(a, b): IDs are "ms-seq" of unsigned 64-bit decimals without leading zeros: compare as text by length.
local function less(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  if #am ~= #bm then return #am < #bm end
  if am ~= bm then return am < bm end
  if #as ~= #bs then return #as < #bs end
  return as < bs
end

-- add_copy(target, id, fields): XADD a copy of an entry (its flat field list) to target under a new ID, with _replayed_from set to
-- the original ID (an earlier _replayed_from of a copy of a copy is replaced, not repeated); returns the copy's ID.
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
  return redis.call(unpack(args))
end
