-- Remove a consumer from its group if, and only if, it holds no pending entries.
--
-- XGROUP DELCONSUMER drops the consumer's pending entries with it: they would never be
-- delivered again. A worker that shuts down cleanly calls this so consumer lists do not fill up
-- with one dead name per restart, without ever risking that loss.
--
-- KEYS[1] stream; ARGV[1] group, ARGV[2] consumer
-- Returns 1 if the consumer was removed, 0 if it still holds entries (or did not exist).
local pending = redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2])
if #pending > 0 then
  return 0
end
return redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2]) >= 0 and 1 or 0
