-- Count the entries of one XRANGE batch, optionally only those holding every given field=value.
--
-- Counting happens inside Redis so that a preview (rewind, replay dry run) moves two integers over
-- the network per batch instead of every entry's fields. Each call reads at most COUNT entries:
-- the caller loops, so Redis is never blocked for longer than one bounded batch.
--
-- KEYS[1] stream
-- ARGV[1] start (an ID, or "(" ID for exclusive), ARGV[2] end ID, ARGV[3] COUNT,
-- ARGV[4..] field/value pairs an entry must all hold (any occurrence of the name counts)
-- Returns {entries read, entries matching, ID of the last entry read or false}.
local entries = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[2], 'COUNT', ARGV[3])
local nmatch = #ARGV - 3
local matched = 0
if nmatch == 0 then
  matched = #entries
else
  for e = 1, #entries do
    if holds_all(entries[e][2], 4) then
      matched = matched + 1
    end
  end
end
local last = false
if #entries > 0 then
  last = entries[#entries][1]
end
return {#entries, matched, last}
