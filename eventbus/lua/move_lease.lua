-- Cross-slot requeue, step 1 of 4 (see eventbus/moves.py): take the right to move some dead letters.
--
-- A script cannot reach a target stream on another node, so a move across slots is three scripts on
-- two nodes; this one makes the mover of each entry unique. For each ID, in the DLQ's slot: if the
-- entry is still in the DLQ and nobody else holds an unexpired lease on it, lease it to this owner.
-- An owner may take its own lease again (a job resumed after its worker was killed), and anyone may
-- take an expired one (a mover killed for good).
--
-- KEYS[1] the DLQ; KEYS[2] its lease hash (ID -> "<expiry ms>:<owner>"), in the DLQ's slot
-- ARGV[1] owner, ARGV[2] lease length in ms, ARGV[3..] DLQ entry IDs
-- Returns one integer per ID: 1 leased to this owner, 0 gone from the DLQ, 2 leased to another owner.
local dlq, leases, owner, span = KEYS[1], KEYS[2], ARGV[1], tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local out = {}
for i = 3, #ARGV do
  local id = ARGV[i]
  if #redis.call('XRANGE', dlq, id, id, 'COUNT', 1) == 0 then
    out[#out + 1] = 0
  else
    local held = redis.call('HGET', leases, id)
    local expiry, holder = nil, nil
    if held then
      local colon = string.find(held, ':', 1, true)
      expiry, holder = tonumber(string.sub(held, 1, colon - 1)), string.sub(held, colon + 1)
    end
    if held and holder ~= owner and expiry > now then
      out[#out + 1] = 2
    else
      redis.call('HSET', leases, id, tostring(now + span) .. ':' .. owner)
      out[#out + 1] = 1
    end
  end
end
-- The hash outlives its newest lease; fields of movers that died expire with it.
redis.call('PEXPIRE', leases, 2 * span)
return out
