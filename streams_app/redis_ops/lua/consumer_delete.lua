-- Delete one consumer of a group, refusing while it still owns pending entries unless forced.
--
-- XGROUP DELCONSUMER drops the consumer's pending entries from the group's PEL: nobody will ever be
-- told about them again. Looking at the consumer's pending count and deleting it in one script
-- means a consumer that reads more entries between the operator's preview and the click is not
-- deleted with them unless the operator said so.
--
-- KEYS[1] stream; ARGV[1] group; ARGV[2] consumer; ARGV[3] "1" to delete even with pending entries
-- Returns {found (1 or 0), pending entries it had, DELCONSUMER's reply or -1 when not deleted}.
-- A missing stream or group is Redis's own error (no such key / NOGROUP).
local rows = redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])
for _, row in ipairs(rows) do
  local name, pending
  for i = 1, #row, 2 do
    if row[i] == 'name' then
      name = row[i + 1]
    elseif row[i] == 'pending' then
      pending = row[i + 1]
    end
  end
  if name == ARGV[2] then
    if pending > 0 and ARGV[3] ~= '1' then
      return {1, pending, -1}
    end
    return {1, pending, redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])}
  end
end
return {0, 0, -1}
