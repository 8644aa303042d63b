-- Walk one batch of entries from an end of a stream and say where the batch stopped.
--
-- A trim preview needs the ID at a given distance from the head or the tail (where MAXLEN N cuts)
-- without moving every entry's fields over the network: only a count and an ID come back. Each
-- call reads at most COUNT entries; the caller loops, so Redis is never blocked for long.
--
-- KEYS[1] stream; ARGV[1] "fwd" (XRANGE from the start) or "rev" (XREVRANGE from the end);
-- ARGV[2] where to start (an ID, "(" ID for exclusive, "-" or "+"); ARGV[3] COUNT
-- Returns {entries read, ID of the last entry read or false}.
local entries
if ARGV[1] == 'rev' then
  entries = redis.call('XREVRANGE', KEYS[1], ARGV[2], '-', 'COUNT', ARGV[3])
else
  entries = redis.call('XRANGE', KEYS[1], ARGV[2], '+', 'COUNT', ARGV[3])
end
local last = false
if #entries > 0 then
  last = entries[#entries][1]
end
return {#entries, last}
