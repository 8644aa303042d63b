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
-- The targets are read from the entries, so they cannot be declared in KEYS: this script is for
-- standalone servers (on Redis Cluster a DLQ and its targets could not share a script anyway).
--
-- KEYS[1] the DLQ
-- ARGV[1] start ('-' or '(' .. exclusive ID), ARGV[2] last ID that may be moved, ARGV[3] COUNT,
-- ARGV[4] mode: 'switch' (eventbus-or-streams), 'field' (target named by a field), 'fixed',
-- ARGV[5] target for 'fixed', and for 'switch' when the switch field is absent or empty,
-- ARGV[6] the switch field ('switch') or the target field ('field'), ARGV[7] a name prefix dropped
-- when the switch field is present ('switch'), ARGV[8] the marker field (_requeued_from),
-- ARGV[9..] field names dropped from every requeued entry
-- Returns {entries read, last ID read or false, {targets}, then per entry: ID, target (index into
-- targets, 0 when declined), outcome}; outcome is the new ID, false when declined, or '!' .. error
-- when the XADD was refused.
local dlq = KEYS[1]
local mode, fixed, switch, prefix, marker = ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local xadd, sub = redis.pcall, string.sub
local drop = {}
for a = 9, #ARGV do
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
    local new_id = xadd('XADD', target, '*', unpack(args))
    local t = target_index[target]
    if not t then
      t = #targets + 1
      targets[t] = target
      target_index[target] = t
    end
    out[n + 2] = t
    if type(new_id) == 'table' and new_id.err then
      out[n + 3] = '!' .. new_id.err
    else
      out[n + 3] = new_id
      moved[#moved + 1] = id
    end
  end
end
if #entries > 0 then
  out[2] = entries[#entries][1]
end
if #moved > 0 then
  redis.call('XDEL', dlq, unpack(moved))
end
return out
