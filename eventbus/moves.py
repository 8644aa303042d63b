"""Requeue across hash slots: moving dead letters to a stream on another node, never lost, never doubled.

One copy, run by the bus's command line (``python -m eventbus requeue``) and by any program that
requeues the bus's dead letters (handing its own client in), so all move with one protocol and respect
each other's leases.

On one server (or when a DLQ and its target share a slot, as ``{orders}:dlq`` and ``orders`` do) a
dead letter moves in one Lua script (``lua/requeue.lua``): still there? XADD + XDEL. On Redis Cluster
a script sees only the keys of one slot, so ``orders:dlq`` (the pre-cluster naming) and ``orders`` on
another node cannot be moved that way, and no MULTI spans nodes either. This module moves them in
steps, each one atomic on its own node, so that a process killed between any two of them leaves
nothing lost (the dead letter stays in the DLQ until its copy exists) and nothing doubled (a copy is
added at most once per dead letter):

1. **lease** (DLQ's slot, ``lua/move_lease.lua``; a caller's bulk path may lease inside its own batch
   script, in the same format, and hand the batch to :func:`add_packed_and_release`): for each entry still in the DLQ, record this owner as its mover in a
   lease hash next to the DLQ, unless another owner holds an unexpired lease. The lease makes the
   mover of an entry unique: two operators pressing "requeue" together leave one of them with
   nothing to do (reported as failed, :data:`BUSY`).
2. **add** (target's slot, ``lua/move_add.lua``): XADD each leased entry to the target and, in the
   same script, record ``DLQ entry ID -> new ID`` in a hash in the target's slot. An entry already
   recorded is not added again: its recorded ID is the answer.
3. **release** (DLQ's slot): XDEL the added entries (or XTRIM the run of them a bulk batch read from
   the DLQ's head) and drop their leases.
4. **forget** (target's slot): drop their records.

What a kill at each point leaves, and why a re-run is right:

* before 2: leases only. A run resumed under the same owner (a resumable job names itself, ``job:<id>``)
  takes them again; any other mover waits for them to expire (:data:`LEASE_MS`), the entries still in
  the DLQ.
* between 2 and 3: copies and records exist, the dead letters are still in the DLQ and leased.
  The re-run leases them again, step 2 finds the records and adds nothing, step 3 removes them.
* between 3 and 4: the dead letters are gone, so nobody can lease or add them again; the records
  expire (:data:`RECORD_TTL_MS`).

Step 4 is safe because step 3 came first: after the XDEL no lease can be granted on the entry, so
no step 2 for it can follow. The one assumption is that a mover does not stall for longer than a
lease between taking it and finishing (each of its calls is bounded by the connection's timeout,
seconds against a lease's minute), and that one owner name is used by one mover at a time; the
records are kept far longer than that for a mover that dies.

Why records and leases rather than a marker in the copy: finding a copy by a field would mean
scanning the target, and a lease is what lets the records be dropped as soon as an entry is moved,
so a bulk requeue of a million entries does not leave a million records behind.

**Consecutive batches, pipelined** (:class:`Release`, :func:`queue_release`, :func:`queue_forget`,
:func:`queue_add`, :func:`execute`): a caller moving a DLQ batch after batch may send the steps of
several batches together, one pipeline per round trip: the release of batch N and the lease of batch
N+2 to the DLQ's node, the forget of N-1 and the add of N+1 to the targets' nodes, in the same round
trip, so that both nodes work at once instead of waiting on each other. Each step of a batch is sent
only after the step before it, for that batch, has answered, so every state a kill can leave is one
of the three above, for at most three batches at once; and a caller that saves where to resume must
save a point before every batch not yet released (a batch read after it is only re-read: leased again
by the same owner, added from its records).

The keys are named to share a slot (:func:`slot_twin`): ``{<DLQ's tag>}`` + :data:`LEASE_PREFIX` + DLQ and
``{<target's tag>}`` + :data:`RECORD_PREFIX` + DLQ.
The clients passed in are redis-py's sync ``Redis`` or ``RedisCluster`` with bytes replies; the
caller translates errors.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from redis.crc import key_slot
from redis.exceptions import NoScriptError

from .connection import is_cluster_client
from .keys import hash_tag
from .scripts import source
from .text import display_text

LEASE_MS = 60_000
"""How long a mover may hold an entry before another may take it over: far beyond the few calls,
each bounded by the connection's timeout, a mover makes between leasing and releasing."""
RECORD_TTL_MS = 7 * 24 * 3600 * 1000
"""How long a record outlives its last write when its mover died before forgetting it: as long as a
replay's cursor, so a job resumed days later still finds what it added."""
BUSY = "Another requeue is moving this entry right now; it stays in the DLQ until that one finishes."


@dataclass(frozen=True, slots=True)
class Moved:
    """What one cross-slot move did, per DLQ entry ID."""

    added: tuple[tuple[str, str], ...]  # (DLQ ID, new ID in the target)
    missing: tuple[str, ...]  # gone from the DLQ before it could be leased
    failed: tuple[tuple[str, str], ...]  # (DLQ ID, reason): still in the DLQ


# ---------------------------------------------------------------- keys


def slot_twin(anchor: bytes, name: bytes) -> bytes:
    """``name`` prefixed with a ``{tag}`` that hashes like ``anchor``: a companion key in ``anchor``'s slot.

    A script may touch a key of a mover's own (a replay's cursor, a requeue's lease or record)
    together with a stream only when both hash to one slot. The tag is ``anchor``'s own ``{tag}``
    when it has one, else ``anchor`` whole (``orders`` -> ``{orders}...``, as the event bus names
    its companion keys); a name with a ``}`` but no valid tag cannot be wrapped, and gets a short
    name found to hash to the same slot (:func:`_slot_names`).
    """
    tag = hash_tag(anchor)
    if tag is not None:
        return b"{" + tag + b"}" + name
    if b"}" not in anchor:
        return b"{" + anchor + b"}" + name
    return b"{" + _slot_names()[key_slot(anchor)] + b"}" + name


@functools.cache
def _slot_names() -> dict[int, bytes]:
    """For each of the 16,384 slots, a short name hashing to it (``bc:<hex>``, found by trying in order).

    Built once per process on first need (about 180,000 CRC16s, a fraction of a second), only for
    streams whose name has a ``}`` without a valid tag.
    """
    names: dict[int, bytes] = {}
    i = 0
    while len(names) < 16384:
        name = b"bc:%x" % i
        names.setdefault(key_slot(name), name)
        i += 1
    return names


# The prefixes keep the names the keys had when this protocol was first written: a lease or a record a
# killed move left behind (records live for days, RECORD_TTL_MS) must still be found after an upgrade.
LEASE_PREFIX = b"busconsole:requeue-lease:"
RECORD_PREFIX = b"busconsole:requeued:"


def lease_key(dlq_key: bytes) -> bytes:
    return slot_twin(dlq_key, LEASE_PREFIX + dlq_key)


def record_key(dlq_key: bytes, target: bytes) -> bytes:
    return slot_twin(target, RECORD_PREFIX + dlq_key)


# ---------------------------------------------------------------- the steps


def move_across(
    client: Any, dlq_key: bytes, target: bytes, planned: Sequence[tuple[str, Sequence[bytes]]], *, owner: str
) -> Moved:
    """Move ``planned`` entries (DLQ ID, flat field/value list to XADD) of ``dlq_key`` to ``target`` in
    another slot: lease them (step 1), then :func:`add_and_release`."""
    ids = [entry_id for entry_id, _ in planned]
    granted = _run(client, "move_lease", [dlq_key, lease_key(dlq_key)], [owner, LEASE_MS, *ids])
    missing: list[str] = []
    failed: list[tuple[str, str]] = []
    leased: list[tuple[str, Sequence[bytes]]] = []
    for (entry_id, fields), state in zip(planned, granted, strict=True):
        if int(state) == 0:
            missing.append(entry_id)
        elif int(state) == 2:
            failed.append((entry_id, BUSY))
        else:
            leased.append((entry_id, fields))
    moved = add_and_release(client, dlq_key, target, leased)
    return Moved(added=moved.added, missing=tuple(missing), failed=tuple(failed) + moved.failed)


def add_and_release(
    client: Any, dlq_key: bytes, target: bytes, leased: Sequence[tuple[str, Sequence[bytes]]]
) -> Moved:
    """Steps 2 to 4 for entries this caller holds leases on, planned here (from :func:`move_across`):
    each one's DLQ ID and flat field/value list."""
    if not leased:
        return Moved(added=(), missing=(), failed=())
    args: list[object] = [RECORD_TTL_MS, b"flat"]
    for entry_id, fields in leased:
        args += (entry_id, len(fields), *fields)
    ids = [entry_id for entry_id, _ in leased]
    moved = _add(client, dlq_key, target, ids, args)
    release(client, dlq_key, target, [entry_id for entry_id, _ in moved.added], ids)
    return moved


@dataclass(frozen=True, slots=True)
class Packed:
    """The entries of one batch leased for one target, as a caller's bulk script hands them back."""

    target: bytes
    ids: tuple[str, ...]  # DLQ IDs, in the order of the packed entries
    packed: bytes  # a MessagePack array of [DLQ ID, field, value, ...], read by lua/move_add.lua only


@dataclass(frozen=True, slots=True)
class Flat:
    """The entries of one batch leased for one target, planned by the client (:func:`move_across`'s form)."""

    target: bytes
    ids: tuple[str, ...]  # DLQ IDs, in the order of ``fields``
    fields: tuple[Sequence[bytes], ...]  # per entry, the flat field/value list to XADD


def add_packed_and_release(
    client: Any, dlq_key: bytes, batch: Sequence[Packed], *, order: Sequence[str], at_head: bool
) -> list[Moved]:
    """Steps 2 to 4 for a batch a caller's bulk script (one that leases in the format of ``lua/move_lease.lua``)
    leased and rewrote in one call; one :class:`Moved` per item of ``batch``.

    The packed entries go to ``lua/move_add.lua`` unread. Every target is added to before the first
    :func:`release`; for each entry the steps keep the order of :func:`add_and_release`.
    ``order`` and ``at_head``: see :func:`release_plan`.
    """
    results = [
        _add(client, dlq_key, item.target, item.ids, [RECORD_TTL_MS, b"packed", item.packed]) for item in batch
    ]
    plan = release_plan(dlq_key, batch, results, order=order, at_head=at_head)
    for n, (item, moved) in enumerate(zip(batch, results, strict=True)):
        done = [entry_id for entry_id, _ in moved.added]
        # The first release trims for every target: all of them were added to by now.
        release(client, dlq_key, item.target, done, item.ids, trim_below=plan.trim_below if n == 0 else None,
                trimmed=plan.trimmed)  # fmt: skip
    return results


@dataclass(frozen=True, slots=True)
class Release:
    """Steps 3 and 4 of one batch added to its targets: what leaves the DLQ and what is dropped after."""

    dlq_key: bytes
    trim_below: str | None  # XTRIM MINID: every entry left below it is done
    trimmed: frozenset[str]  # the done entries that XTRIM drops (the rest are XDELed)
    done: tuple[tuple[bytes, tuple[str, ...]], ...]  # per target: the IDs added, whose records go
    leased: tuple[str, ...]  # every ID of the batch leased, added or not: their leases go
    clean: bool  # every entry of ``order`` was added: the batch leaves nothing in the DLQ


def release_plan(
    dlq_key: bytes, batch: Sequence[Packed | Flat], results: Sequence[Moved], *, order: Sequence[str], at_head: bool
) -> Release:
    """What releasing ``batch`` (added to its targets with ``results``) does.

    ``order`` is the IDs of the batch still in the DLQ, as read (one XRANGE); ``at_head`` says nothing
    in the DLQ was older than them (it stays so: nothing can be added below an existing entry). Then
    the leading run of ``order`` that was added is exactly the DLQ's entries below its last one, and
    the release drops them by one XTRIM MINID.
    """
    added: set[str] = set()
    done: list[tuple[bytes, tuple[str, ...]]] = []
    for item, moved in zip(batch, results, strict=True):
        ids = tuple(entry_id for entry_id, _ in moved.added) if moved.failed else item.ids
        added.update(ids)
        done.append((item.target, ids))
    clean = added.issuperset(order)
    run = 0
    if at_head:
        run = len(order) if clean else next((n for n, entry_id in enumerate(order) if entry_id not in added), len(order))
    trim_below = order[run - 1] if run > 1 else None
    trimmed = frozenset(order[: run - 1]) if trim_below else frozenset()
    leased = tuple(entry_id for item in batch for entry_id in item.ids)
    return Release(dlq_key, trim_below, trimmed, tuple(done), leased, clean)


def _add(client: Any, dlq_key: bytes, target: bytes, ids: Sequence[str], args: list[object]) -> Moved:
    """Step 2: ``lua/move_add.lua`` with ``args``, its replies sorted into added and failed."""
    return _outcome(ids, _run(client, "move_add", [target, record_key(dlq_key, target)], args))


def _outcome(ids: Sequence[str], replies: Sequence[bytes]) -> Moved:
    refused = [n for n, reply in enumerate(replies) if reply[:1] == b"!"]
    if not refused:  # the usual case, without a test per entry
        return Moved(added=tuple(zip(ids, [reply.decode() for reply in replies], strict=True)), missing=(), failed=())
    added: list[tuple[str, str]] = []
    failed: list[tuple[str, str]] = []
    for entry_id, reply in zip(ids, replies, strict=True):
        if reply.startswith(b"!"):
            failed.append((entry_id, f"Redis refused the XADD: {display_text(reply[1:])}"))
        else:
            added.append((entry_id, reply.decode()))
    return Moved(added=tuple(added), missing=(), failed=tuple(failed))


def release(
    client: Any,
    dlq_key: bytes,
    target: bytes,
    done: Sequence[str],
    leased: Sequence[str],
    *,
    trim_below: str | None = None,
    trimmed: Collection[str] = (),
) -> None:
    """Steps 3 and 4: XDEL the ``done`` entries and drop every ``leased`` one's lease (one pipeline on
    the DLQ's node), then forget the records of ``done`` (the target's node). In this order: see the
    module docstring.

    ``trim_below``: an ID below which every entry left in the DLQ is done (the caller read them from
    the DLQ's head; ``trimmed`` names those it covers): one XTRIM MINID drops them, which frees whole
    listpack nodes where an XDEL looks up and marks each ID, and only the rest of ``done`` is XDELed.
    """
    pipe = client.pipeline(transaction=False)
    if trim_below:
        pipe.execute_command("XTRIM", dlq_key, "MINID", trim_below)
    rest = [entry_id for entry_id in done if entry_id not in trimmed]
    if rest:
        pipe.execute_command("XDEL", dlq_key, *rest)
    pipe.execute_command("HDEL", lease_key(dlq_key), *leased)
    pipe.execute()
    if done:
        client.execute_command("HDEL", record_key(dlq_key, target), *done)


def _run(client: Any, name: str, keys: Sequence[bytes], args: Sequence[object]) -> Any:
    """Run ``lua/<name>.lua`` on ``client`` (EVALSHA, loaded on NOSCRIPT). Registering is a SHA1 of the
    source, not a round trip, so it is not cached per client."""
    return client.register_script(source(name))(keys=keys, args=args)


# ---------------------------------------------------------------- the steps of several batches in one pipeline

Command = tuple[object, ...]
"""One command of a pipeline, as ``execute_command`` takes it."""


def sha_of(text: str) -> str:
    """The SHA1 EVALSHA names a script by."""
    return hashlib.sha1(text.encode()).hexdigest()


_MOVE_ADD_SHA = sha_of(source("move_add"))
_MOVE_LEASE_SHA = sha_of(source("move_lease"))


def queue_lease(dlq_key: bytes, ids: Sequence[str], *, owner: str) -> Command:
    """Step 1 for entries planned by the client (``lua/move_lease.lua``), to send in a pipeline; its reply
    is one state per ID: 1 leased to ``owner``, 0 gone from the DLQ, 2 leased to another owner."""
    return ("EVALSHA", _MOVE_LEASE_SHA, 2, dlq_key, lease_key(dlq_key), owner, LEASE_MS, *ids)


def queue_add(dlq_key: bytes, item: Packed | Flat) -> Command:
    """Step 2 of a batch for one target (``lua/move_add.lua``), to send in a pipeline; its reply goes to
    :func:`add_outcome`."""
    head = ("EVALSHA", _MOVE_ADD_SHA, 2, item.target, record_key(dlq_key, item.target), RECORD_TTL_MS)
    if isinstance(item, Packed):
        return (*head, b"packed", item.packed)
    flat: list[object] = [b"flat"]
    for entry_id, fields in zip(item.ids, item.fields, strict=True):
        flat += (entry_id, len(fields), *fields)
    return (*head, *flat)


def add_outcome(item: Packed | Flat, reply: Sequence[bytes]) -> Moved:
    """The reply of a :func:`queue_add` sorted into added and failed."""
    return _outcome(item.ids, reply)


def queue_release(release: Release) -> list[Command]:
    """Step 3 of a batch (the DLQ's node): drop the done entries and every lease of the batch."""
    commands: list[Command] = []
    if release.trim_below:
        commands.append(("XTRIM", release.dlq_key, "MINID", release.trim_below))
    rest = [entry_id for _, ids in release.done for entry_id in ids if entry_id not in release.trimmed]
    if rest:
        commands.append(("XDEL", release.dlq_key, *rest))
    if release.leased:
        commands.append(("HDEL", lease_key(release.dlq_key), *release.leased))
    return commands


def queue_forget(release: Release) -> list[Command]:
    """Step 4 of a batch whose :func:`queue_release` has answered (each target's node): drop its records."""
    return [("HDEL", record_key(release.dlq_key, target), *ids) for target, ids in release.done if ids]


def execute(client: Any, commands: Sequence[Command], *, scripts: Mapping[str, str] = {}) -> list[Any]:  # noqa: B006 - read only
    """Send ``commands`` in one pipeline (on a cluster, one per node, all written before any is read)
    and return their replies; an error is raised once all have run.

    A script a server does not know (NOSCRIPT: restarted, failed over) is loaded and that command alone
    sent again, after the others: ``scripts`` maps a SHA1 to its source (``lua/move_add.lua`` and
    ``lua/move_lease.lua`` are known).
    """
    pipe = client.pipeline(transaction=False)
    routed = is_cluster_client(client)
    for command in commands:
        if routed and command[0] == "EVALSHA":
            # redis-py's cluster pipeline finds a script's node by a COMMAND GETKEYS round trip per
            # EVALSHA before it sends anything (it knows no routing policy for the command); its first
            # key names the node, so the pipeline is told, and a MOVED reply is still followed.
            pipe.execute_command(*command, target_nodes=client.get_node_from_key(command[3]))
        else:
            pipe.execute_command(*command)
    replies = list(pipe.execute(raise_on_error=False))
    known = {_MOVE_ADD_SHA: source("move_add"), _MOVE_LEASE_SHA: source("move_lease"), **scripts}
    for n, reply in enumerate(replies):
        if isinstance(reply, NoScriptError) and commands[n][0] == "EVALSHA":
            client.script_load(known[str(commands[n][1])])
            replies[n] = client.execute_command(*commands[n])
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return replies
