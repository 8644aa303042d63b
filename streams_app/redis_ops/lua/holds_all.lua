-- Prepended to the scripts that filter entries by field (see _common._source); defines one function.
--
-- True when an entry's flat field list holds every name/value pair of ARGV[from..] (any occurrence
-- of the name counts). With no pairs, every entry holds them.
local function holds_all(fields, from)
  for m = from, #ARGV, 2 do
    local found = false
    for f = 1, #fields, 2 do
      if fields[f] == ARGV[m] and fields[f + 1] == ARGV[m + 1] then
        found = true
        break
      end
    end
    if not found then
      return false
    end
  end
  return true
end

