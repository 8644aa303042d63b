-- Requeue dead letters: for each entry, if it is still in the DLQ, XADD its payload to its
-- target stream and XDEL it from the DLQ, as one step.
--
-- One copy, run by the bus's command line (python -m eventbus requeue, eventbus/cli_actions.py) and
-- by any program that requeues the bus's dead letters, so all requeue with one semantics.
--
-- The existence check, the XADD and the XDEL of one entry run inside one script, so two operators
-- (or a job and an operator) requeueing the same entry produce exactly one new entry, and a job
-- killed after this script ran finds the entry gone instead of requeueing it twice. The payload
-- was planned in Python from the entry as read just before: an ID names one immutable entry, so
-- "it still exists" means "it still holds what was read".
--
-- XADD runs under pcall and before XDEL (add_then_remove, eventbus/lua/add_then_remove.lua, prepended
-- when the source is read): if the target refuses (WRONGTYPE, OOM), the dead letter stays where it was
-- and the entry's reply says why. Nothing is ever removed without a copy.
--
-- KEYS[1] the DLQ; KEYS[2..] the target streams (declared, as Redis Cluster requires; on a
--   cluster they must share the DLQ's hash slot)
-- ARGV, repeated per entry: DLQ entry ID, index of its target in KEYS, N, then N field/value args
-- Returns one reply per entry, in order: the new entry's ID; false when the DLQ entry is gone;
-- or "!" followed by Redis's error when the XADD was refused.
local dlq = KEYS[1]
local out = {}
local i, n = 1, #ARGV
while i <= n do
  local id = ARGV[i]
  local target = KEYS[tonumber(ARGV[i + 1])]
  local last = i + 2 + tonumber(ARGV[i + 2])
  if #redis.call('XRANGE', dlq, id, id, 'COUNT', 1) == 0 then
    out[#out + 1] = false
  else
    out[#out + 1] = add_then_remove(target, ARGV, i + 3, last, 'XDEL', dlq, id)
  end
  i = last + 1
end
return out
