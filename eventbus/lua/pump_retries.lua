-- Re-add the retries that are due to their stream.
--
-- Any number of workers may pump the same set at once: each member is re-added and removed in
-- the same script, so exactly one of them moves it. Due times are compared with the server's
-- clock, as they were computed with it (see schedule_retry.lua), so skewed hosts do not matter.
--
-- KEYS[1] retry sorted set, KEYS[2] stream
-- ARGV[1] most entries to move in this call, ARGV[2] MAXLEN ~ of the stream ('' for none)
-- Returns the number of entries moved.
local t = redis.call('TIME')
local now = string.format('%d', t[1] * 1000 + math.floor(t[2] / 1000))
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
for _, member in ipairs(due) do
  local fields = cmsgpack.unpack(member)
  if ARGV[2] ~= '' then
    redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], '*', unpack(fields))
  else
    redis.call('XADD', KEYS[2], '*', unpack(fields))
  end
  redis.call('ZREM', KEYS[1], member)
end
return #due
