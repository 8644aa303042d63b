"""Requeue across hash slots: moving dead letters to a stream on another node, never lost, never doubled.

On one server (or when a DLQ and its target share a slot, as ``{orders}:dlq`` and ``orders`` do) a
dead letter moves in one Lua script: still there? XADD + XDEL. On Redis Cluster a script sees only
the keys of one slot, so ``orders:dlq`` (the pre-cluster naming) and ``orders`` on another node
cannot be moved that way, and no MULTI spans nodes either. This module moves them in steps, each
one atomic on its own node, so that a process killed between any two of them leaves nothing lost
(the dead letter stays in the DLQ until its copy exists) and nothing doubled (a copy is added at
most once per dead letter):

1. **lease** (DLQ's slot, ``lua/move_lease.lua``; for a bulk batch ``lua/requeue_rule.lua`` reads,
   rewrites and leases in one call): for each entry still in the DLQ, record this owner as its
   mover in a lease hash next to the DLQ, unless another owner holds an unexpired lease. The lease
   makes the mover of an entry unique: two operators pressing "requeue" together leave one of them
   with nothing to do (reported as failed, "being moved by another requeue").
2. **add** (target's slot, ``lua/move_add.lua``): XADD each leased entry to the target and, in the
   same script, record ``DLQ entry ID -> new ID`` in a hash in the target's slot. An entry already
   recorded is not added again: its recorded ID is the answer.
3. **release** (DLQ's slot): XDEL the added entries and drop their leases.
4. **forget** (target's slot): drop their records.

What a kill at each point leaves, and why a re-run is right:

* before 2: leases only. A job resumed under the same owner (``job:<id>``) takes them again; any
  other mover waits for them to expire (:data:`LEASE_MS`), the entries still in the DLQ.
* between 2 and 3: copies and records exist, the dead letters are still in the DLQ and leased.
  The re-run leases them again, step 2 finds the records and adds nothing, step 3 removes them.
* between 3 and 4: the dead letters are gone, so nobody can lease or add them again; the records
  expire (:data:`RECORD_TTL_MS`).

Step 4 is safe because step 3 came first: after the XDEL no lease can be granted on the entry, so
no step 2 for it can follow. The one assumption is that a mover does not stall for longer than a
lease between taking it and finishing (each of its calls is bounded by the connection's timeout,
seconds against a lease's minute); the records are kept far longer than that for a mover that dies.

Why records and leases rather than a marker in the copy: finding a copy by a field would mean
scanning the target, and a lease is what lets the records be dropped as soon as an entry is moved,
so a bulk requeue of a million entries does not leave a million records behind.

The keys are the console's own, named to share a slot (:func:`._common.slot_twin`):
``{<DLQ's tag>}busconsole:requeue-lease:<DLQ>`` and ``{<target's tag>}busconsole:requeued:<DLQ>``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..client import get_client
from ..commands import pipelined
from ..parsers import reply_text
from ._common import _script, slot_twin

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


def lease_key(dlq_key: bytes) -> bytes:
    return slot_twin(dlq_key, b"busconsole:requeue-lease:" + dlq_key)


def record_key(dlq_key: bytes, target: bytes) -> bytes:
    return slot_twin(target, b"busconsole:requeued:" + dlq_key)


def move_across(
    conn: str, dlq_key: bytes, target: bytes, planned: Sequence[tuple[str, Sequence[bytes]]], *, owner: str
) -> Moved:
    """Move ``planned`` entries (DLQ ID, flat field/value list to XADD) of ``dlq_key`` to ``target`` in
    another slot: lease them, then :func:`add_and_release`.

    The caller translates errors; see the module docstring for the steps and what a kill leaves.
    """
    client = get_client(conn)
    ids = [entry_id for entry_id, _ in planned]
    granted = _script(client, "move_lease")(keys=[dlq_key, lease_key(dlq_key)], args=[owner, LEASE_MS, *ids])
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
    moved = add_and_release(conn, dlq_key, target, leased)
    return Moved(added=moved.added, missing=tuple(missing), failed=tuple(failed) + moved.failed)


def add_and_release(
    conn: str, dlq_key: bytes, target: bytes, leased: Sequence[tuple[str, Sequence[bytes]]]
) -> Moved:
    """Steps 2 to 4 for entries this caller holds leases on (from :func:`move_across` or from
    ``lua/requeue_rule.lua``, which leases and rewrites a batch in one call)."""
    if not leased:
        return Moved(added=(), missing=(), failed=())
    client = get_client(conn)
    record = record_key(dlq_key, target)
    args: list[object] = [RECORD_TTL_MS]
    for entry_id, fields in leased:
        args += (entry_id, len(fields), *fields)
    replies = _script(client, "move_add")(keys=[target, record], args=args)
    added: list[tuple[str, str]] = []
    failed: list[tuple[str, str]] = []
    for (entry_id, _), reply in zip(leased, replies, strict=True):
        if reply.startswith(b"!"):
            failed.append((entry_id, f"Redis refused the XADD: {reply_text(reply[1:])}"))
        else:
            added.append((entry_id, reply_text(reply)))
    done = [entry_id for entry_id, _ in added]
    # Release, then forget: in this order, on their own nodes (see the module docstring).
    release: list[tuple[object, ...]] = [("HDEL", lease_key(dlq_key), *(entry_id for entry_id, _ in leased))]
    if done:
        release.insert(0, ("XDEL", dlq_key, *done))
    pipelined(client, release)
    if done:
        client.execute_command("HDEL", record, *done)
    return Moved(added=tuple(added), missing=(), failed=tuple(failed))
