-- Append one event to a progress stream and set the stream's expiry, in one step.
--
-- One step, so a reader never sees a started run without its expiry (a task that dies then would
-- leave its stream for ever) nor, at a start, the previous run's events after the DEL. A script
-- rather than MULTI/EXEC: the stream is its only key, so it runs on a Redis Cluster too, where
-- redis-py has no transactions.
--
-- KEYS[1] progress stream
-- ARGV[1] '1' to replace any earlier run of the task (DEL first), else '0'
-- ARGV[2] MAXLEN ~, ARGV[3] expiry (ms), ARGV[4..] the entry's fields as name/value pairs
-- Returns the new entry's ID.
if ARGV[1] == '1' then
  redis.call('DEL', KEYS[1])
end
local args = {'XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*'}
for i = 4, #ARGV do
  args[#args + 1] = ARGV[i]
end
local id = redis.call(unpack(args))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return id
