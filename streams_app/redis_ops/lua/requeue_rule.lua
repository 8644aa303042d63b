-- Requeue one batch of the oldest dead letters up to an ID, planning each entry here by a rule.
--
-- The bulk path of requeue-all (SPEC section 8 asks for >= 20,000 entries/s and >= 10x a per-entry
-- loop): entries never travel to the client and back. The rule is a field rewrite that Python derives
-- from the DLQ's convention (``actions._requeue_rule``, checked against ``conventions.requeue_plan`` by
-- the tests); whenever the rule cannot tell where an entry goes, the entry is *declined*, left in the
-- DLQ untouched, and the client plans it with the conventions module instead.
--
-- Each entry read here is moved at most once: the XRANGE, every XADD and the XDEL of the moved IDs run
-- in this one script, so a job that re-runs a batch after a crash finds the moved entries gone. XADD
-- runs under pcall and before the XDEL: a refused XADD leaves its dead letter in place.
--
-- The targets are read from the entries, so on a standalone server they are not declared. On Redis
-- Cluster a script may only write keys it declares, in its own slot ('cluster' placement): an entry
-- bound for the one target the caller declared in the DLQ's slot (KEYS[3]) is moved here as above;
-- any other is *leased* to the caller in KEYS[2] instead (in eventbus/lua/move_lease.lua's format)
-- and returned rewritten, for the client to add to its target on its own node and then delete here
-- (eventbus/moves.py). An entry leased to another owner is left alone ('~'). The rewrite is this
-- script's in both cases: one rule, wherever the entry goes.
--
-- KEYS[1] the DLQ; 'cluster' only: KEYS[2] the DLQ's lease hash, KEYS[3] (optional) the target in
-- the DLQ's slot
-- ARGV[1] start ('-' or '(' .. exclusive ID), ARGV[2] last ID that may be moved, ARGV[3] COUNT,
-- ARGV[4] mode: 'switch' (eventbus-or-streams), 'field' (target named by a field), 'fixed',
-- ARGV[5] target for 'fixed', and for 'switch' when the switch field is absent or empty,
-- ARGV[6] the switch field ('switch') or the target field ('field'), ARGV[7] a name prefix dropped
-- when the switch field is present ('switch'), ARGV[8] the marker field (_requeued_from),
-- ARGV[9] placement: 'any' (one server: write every target) or 'cluster',
-- ARGV[10] owner and ARGV[11] lease length in ms ('cluster'),
-- ARGV[12..] field names dropped from every requeued entry
-- Returns {entries read, last ID read or false, {targets}, then per entry: ID, target (index into
-- targets, 0 when declined), outcome}; outcome is the new ID, false when declined, '!' .. error
-- when the XADD was refused, and ('cluster') the rewritten field/value list when leased to the
-- caller, '~' when leased to another owner.
local dlq = KEYS[1]
local mode, fixed, switch, prefix, marker = ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local cluster = ARGV[9] == 'cluster'
local leases, local_target, owner, span = KEYS[2], KEYS[3], ARGV[10], tonumber(ARGV[11])
local xadd, sub = redis.pcall, string.sub
local now = 0
if cluster then
  local clock = redis.call('TIME')
  now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
end
-- Whether another owner holds an unexpired lease on an entry (``held``: its HMGET reply), else lease
-- it to this owner (written by one HSET at the end).
local granted, lease_value = {}, cluster and (tostring(now + span) .. ':' .. owner)
local function lease(id, held)
  if held then
    local colon = string.find(held, ':', 1, true)
    if sub(held, colon + 1) ~= owner and tonumber(sub(held, 1, colon - 1)) > now then
      return false
    end
  end
  granted[#granted + 1] = id
  granted[#granted + 1] = lease_value
  return true
end
local drop = {}
for a = 12, #ARGV do
  drop[ARGV[a]] = true
end
-- Whether to keep a field name, decided once per name (a DLQ's entries share a handful of names).
local plen = #prefix
local keep_plain, keep_strip = {}, {}
local function keeps(name, strip)
  local memo = strip and keep_strip or keep_plain
  local verdict = memo[name]
  if verdict == nil then
    verdict = not drop[name] and not (strip and sub(name, 1, plen) == prefix)
    memo[name] = verdict
  end
  return verdict
end

local entries = redis.call('XRANGE', dlq, ARGV[1], ARGV[2], 'COUNT', ARGV[3])
local held = {}
if cluster and #entries > 0 then
  local ids = {}
  for e = 1, #entries do ids[e] = entries[e][1] end
  held = redis.call('HMGET', leases, unpack(ids))
end
local out = {#entries, false, {}}
local targets, target_index = out[3], {}
local moved = {}
for e = 1, #entries do
  local id, fields = entries[e][1], entries[e][2]
  local target, strip = fixed, false
  if mode ~= 'fixed' then
    local found = nil
    for f = 1, #fields, 2 do
      if fields[f] == switch then
        found = fields[f + 1]
        break
      end
    end
    if mode == 'switch' then
      if found then
        strip = plen > 0
        if found ~= '' then target = found end
      end
    else
      target = found or ''
    end
  end
  local n = #out
  out[n + 1] = id
  if target == '' or target == dlq then
    out[n + 2] = 0
    out[n + 3] = false
  else
    local args, a = {}, 0
    for f = 1, #fields, 2 do
      local name = fields[f]
      if keeps(name, strip) then
        args[a + 1] = name
        args[a + 2] = fields[f + 1]
        a = a + 2
      end
    end
    args[a + 1] = marker
    args[a + 2] = id
    local t = target_index[target]
    if not t then
      t = #targets + 1
      targets[t] = target
      target_index[target] = t
    end
    out[n + 2] = t
    if cluster and target ~= local_target then
      out[n + 3] = lease(id, held[e]) and args or '~'
    else
      local new_id = xadd('XADD', target, '*', unpack(args))
      if type(new_id) == 'table' and new_id.err then
        out[n + 3] = '!' .. new_id.err
      else
        out[n + 3] = new_id
        moved[#moved + 1] = id
      end
    end
  end
end
if #entries > 0 then
  out[2] = entries[#entries][1]
end
if #moved > 0 then
  redis.call('XDEL', dlq, unpack(moved))
end
if #granted > 0 then
  redis.call('HSET', leases, unpack(granted))
end
if cluster then
  redis.call('PEXPIRE', leases, 2 * span)
end
return out
