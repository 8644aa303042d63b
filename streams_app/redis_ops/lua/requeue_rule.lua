-- Requeue one batch of the oldest dead letters up to an ID, planning each entry here by a rule.
--
-- The bulk path of requeue-all (docs/performance.md#goals-and-floors: within 0.8x of a bare Lua batch, >= 20x a per-entry
-- loop): entries never travel to the client and back. The rule is a field rewrite that Python derives
-- from the DLQ's convention (``actions._requeue_rule``, checked against ``conventions.requeue_plan`` by
-- the tests); whenever the rule cannot tell where an entry goes, the entry is *declined*, left in the
-- DLQ untouched, and the client plans it with the conventions module instead.
--
-- Each entry read here is moved at most once: the XRANGE, every XADD and the removal of the moved IDs
-- run in this one script, so a job that re-runs a batch after a crash finds the moved entries gone.
-- XADD runs under pcall and before the removal: a refused XADD leaves its dead letter in place.
--
-- The removal: when the moved entries begin the DLQ (nothing older is left in it, the usual case of a
-- requeue-all), all but the last of that run are dropped by one XTRIM MINID, which frees whole
-- listpack nodes instead of looking up and marking each ID as XDEL does (measured: XDEL was a tenth
-- of a batch's time in Redis, XTRIM is almost nothing); the rest are XDELed. Either way exactly the
-- moved entries leave: the batch is a contiguous XRANGE, so the entries below the first one not moved
-- are the ones moved.
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
-- ARGV[12] 'all' (reply with every entry) or 'count' (leave out the entries moved here: a bulk job
-- only counts them, and building, sending and parsing three replies per entry it would drop costs
-- both sides a fifth of the batch), ARGV[13..] field names dropped from every requeued entry
-- Returns {entries read, last ID read or false, {targets}, entries moved here, {per target: the
-- entries leased to the caller for it, packed, or false}, whether nothing in the DLQ is older than
-- the batch (1 or nil: the client's release may then XTRIM too), {per target: entries moved here} (so a
-- bulk job that only counts can still say how many went to each stream), then per entry (each one, or
-- with 'count' those not moved here): ID, target (index into targets, 0 when declined), outcome};
-- outcome is the new ID, false when declined, '!' .. error when the XADD was refused, and
-- ('cluster') 1 when leased to the caller, '~' when leased to another owner. The leased entries of
-- one target are rewritten here and packed in one MessagePack array of {DLQ ID, field, value, ...},
-- in the order of their IDs in the reply: the client passes it to the target's node unread
-- (eventbus/lua/move_add.lua).
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
local itemize = ARGV[12] == 'all'
-- hset_many(key, pairs): eventbus/lua/hset_many.lua, prepended when the source is read (_common._source).

local drop = {}
for a = 13, #ARGV do
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
-- Whether nothing in the DLQ is older than this batch. It stays true: no entry can be added below
-- one that exists.
local at_head = false
if #entries > 0 then
  at_head = ARGV[1] == '-' or redis.call('XRANGE', dlq, '-', '+', 'COUNT', 1)[1][1] == entries[1][1]
end
local out = {#entries, false, {}, 0, {}, at_head, {}}
local targets, target_index, packs, per_target = out[3], {}, {}, out[7]
local moved, head = {}, 0 -- head: how many entries from the batch's first were all moved
local n = #out
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
  local t, outcome, here = 0, false, false
  if target ~= '' and target ~= dlq then
    -- An entry for another slot is packed for the client with its ID first: {ID, field, value, ...}.
    local away = cluster and target ~= local_target
    local args, a, memo = {}, 0, strip and keep_strip or keep_plain
    if away then
      args[1], a = id, 1
    end
    for f = 1, #fields, 2 do
      local name = fields[f]
      local keep = memo[name] -- looked up here, the function call only for a name not seen yet
      if keep == nil then keep = keeps(name, strip) end
      if keep then
        args[a + 1] = name
        args[a + 2] = fields[f + 1]
        a = a + 2
      end
    end
    args[a + 1] = marker
    args[a + 2] = id
    t = target_index[target]
    if not t then
      t = #targets + 1
      targets[t] = target
      target_index[target] = t
      per_target[t] = 0
    end
    if away then
      if lease(id, held[e]) then
        local pack = packs[t]
        if not pack then
          pack = {}
          packs[t] = pack
        end
        pack[#pack + 1] = args
        outcome = 1
      else
        outcome = '~'
      end
    else
      local new_id = xadd('XADD', target, '*', unpack(args))
      if type(new_id) == 'table' and new_id.err then
        outcome = '!' .. new_id.err
      else
        outcome, here = new_id, true
        moved[#moved + 1] = id
        per_target[t] = per_target[t] + 1
        if head == e - 1 then head = e end
      end
    end
  end
  if itemize or not here then
    out[n + 1], out[n + 2], out[n + 3] = id, t, outcome
    n = n + 3
  end
end
out[4] = #moved
for t = 1, #targets do
  out[5][t] = packs[t] and cmsgpack.pack(packs[t]) or false
end
if #entries > 0 then
  out[2] = entries[#entries][1]
end
if #moved > 0 then
  local from = 1
  if head > 1 and at_head then
    -- Drops entries[1 .. head - 1], the entries below entries[head]: nothing older is left.
    redis.call('XTRIM', dlq, 'MINID', entries[head][1])
    from = head
  end
  redis.call('XDEL', dlq, unpack(moved, from))
end
if #granted > 0 then
  hset_many(leases, granted)
end
if cluster then
  redis.call('PEXPIRE', leases, 2 * span)
end
return out
