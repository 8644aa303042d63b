-- Move an entry to its dead-letter stream and acknowledge the original, in one step.
--
-- One step, so that a crash can neither lose the event (acked, never filed) nor file it twice
-- (filed, yet still pending and so reclaimed and filed again). As with retries, the entry must
-- still be pending for this consumer; an empty consumer name skips that check (for tools that
-- dead-letter on an operator's behalf).
--
-- KEYS[1] stream, KEYS[2] dead-letter stream
-- ARGV[1] group, ARGV[2] entry id, ARGV[3] consumer, ARGV[4] MAXLEN ~ of the DLQ ('' for none)
-- ARGV[5..] the DLQ entry's fields as name/value pairs; dlq_failed_at (server clock, ms) is added
-- Returns the new DLQ entry's ID, or false when the entry is no longer pending for this consumer.
local stream, dlq = KEYS[1], KEYS[2]
local group, id, consumer = ARGV[1], ARGV[2], ARGV[3]

local owner = redis.call('XPENDING', stream, group, id, id, 1)
if #owner == 0 or (consumer ~= '' and owner[1][2] ~= consumer) then
  return false
end

local t = redis.call('TIME')
local args = {'XADD', dlq}
if ARGV[4] ~= '' then
  args[#args + 1] = 'MAXLEN'
  args[#args + 1] = '~'
  args[#args + 1] = ARGV[4]
end
args[#args + 1] = '*'
for i = 5, #ARGV do
  args[#args + 1] = ARGV[i]
end
args[#args + 1] = 'dlq_failed_at'
args[#args + 1] = string.format('%d', t[1] * 1000 + math.floor(t[2] / 1000))
local new_id = redis.call(unpack(args))
redis.call('XACK', stream, group, id)
return new_id
