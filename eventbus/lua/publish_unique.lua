-- Publish an event unless its uniqueness key is already held.
--
-- Keys are members of a sorted set scored by when they expire (server clock, ms): a plain set,
-- as in go-workflows, is released when the one task finishes, but an event has as many
-- consumers as its stream has groups, so "finished" is not defined; a window is. Expired keys
-- are pruned here, so the set stays as small as the window allows.
--
-- KEYS[1] stream, KEYS[2] uniqueness sorted set
-- ARGV[1] uniqueness key, ARGV[2] window (ms), ARGV[3] MAXLEN ~ ('' for none), ARGV[4..] fields
-- Returns the new entry ID, or false if the key is held.
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', string.format('%d', now))
if redis.call('ZADD', KEYS[2], 'NX', string.format('%d', now + tonumber(ARGV[2])), ARGV[1]) == 0 then
  return false
end
local args = {'XADD', KEYS[1]}
if ARGV[3] ~= '' then
  args[#args + 1] = 'MAXLEN'
  args[#args + 1] = '~'
  args[#args + 1] = ARGV[3]
end
args[#args + 1] = '*'
for i = 4, #ARGV do
  args[#args + 1] = ARGV[i]
end
return redis.call(unpack(args))
