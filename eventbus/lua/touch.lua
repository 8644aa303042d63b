-- Set the idle time of entries this consumer still holds, without counting a delivery.
--
-- With idle 0 this is the heartbeat of a long handler: XCLAIM ... JUSTID to itself resets the
-- idle time, so reclaimers (XAUTOCLAIM with min-idle = the lease) leave the entry alone. With
-- idle = the lease it releases entries at shutdown: they look expired and the next reclaim by
-- any worker takes them at once. Entries another consumer has claimed in the meantime are left
-- alone (a plain XCLAIM would steal them back) and reported as lost.
--
-- KEYS[1] stream
-- ARGV[1] group, ARGV[2] consumer, ARGV[3] idle time to set (ms), ARGV[4..] entry ids
-- Returns the ids that are no longer pending for this consumer.
local stream, group, consumer = KEYS[1], ARGV[1], ARGV[2]
local claim = {'XCLAIM', stream, group, consumer, '0'}
local lost = {}
for i = 4, #ARGV do
  local p = redis.call('XPENDING', stream, group, ARGV[i], ARGV[i], 1)
  if #p > 0 and p[1][2] == consumer then
    claim[#claim + 1] = ARGV[i]
  else
    lost[#lost + 1] = ARGV[i]
  end
end
if #claim > 5 then
  claim[#claim + 1] = 'IDLE'
  claim[#claim + 1] = ARGV[3]
  claim[#claim + 1] = 'JUSTID'
  redis.call(unpack(claim))
end
return lost
