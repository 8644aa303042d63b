"""What the acting commands of ``python -m eventbus`` do: requeue dead letters, claim pending entries.

**requeue** has one semantics wherever it runs, because every requeuer runs this code: each entry is
planned by the shared conventions (:func:`eventbus.conventions.requeue_plan`: the original fields, without the DLQ's
bookkeeping and the retry counter, plus ``_requeued_from``), then ONE call of ``lua/requeue.lua`` per
batch moves the batch, each entry as its own "still in the DLQ? XADD to its stream + XDEL" step. Two
requeues of the same entry (two terminals, or a terminal and another program) make exactly one new entry;
the other finds it ``missing``. On a cluster that script can write only streams in the DLQ's hash slot
(``{orders}:dlq`` -> ``orders``); an entry bound elsewhere (``orders:dlq`` -> ``orders``, or a target in
another slot) moves by the stepwise protocol (:mod:`eventbus.moves`: lease, add with a
record, delete, forget), under an owner name unique to this run. A run killed between those steps
leaves its entries leased: a later run finishes them once the lease expires
(:data:`eventbus.moves.LEASE_MS`), adding nothing twice; until then it reports them ``failed``
(another requeue is moving them) and they stay in the DLQ.

**claim** is XCLAIM (``--ids``) or an XAUTOCLAIM sweep (``--all``) with the operator's ``--min-idle``,
so an entry its consumer touched meanwhile is not stolen.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from redis.crc import key_slot

from . import moves, requeue_run
from .cli_reads import CommandError, name, pairs
from .connection import SyncClient, is_cluster_client
from .conventions import DlqPattern, NotRequeueable, detect_dlq, requeue_plan
from .scripts import source
from .text import display_text

MAX_BATCH = 2000
"""Entries one requeue script call moves (about 14 ms of Redis time, so other clients are not held up)."""
MAX_SWEEPS = 1000
"""XAUTOCLAIM calls one ``claim --all`` makes at most (1000 entries each)."""


@dataclass(slots=True)
class RequeueOutcome:
    requeued: list[dict[str, str]] = field(default_factory=list)  # dlq_id, stream, new_id
    missing: list[str] = field(default_factory=list)  # no longer in the DLQ
    failed: list[dict[str, str]] = field(default_factory=list)  # dlq_id, reason: still in the DLQ

    def json(self) -> dict[str, Any]:
        return {"requeued": self.requeued, "missing": self.missing, "failed": self.failed}


def require_dlq(key: bytes, patterns: Sequence[DlqPattern]) -> None:
    if detect_dlq(key, patterns) is None:
        raise CommandError(f"{name(key)!r} is not a dead-letter queue by any known convention", 2)


def mover_name() -> str:
    """The owner of one run's leases: unique, so two terminals never share a lease (the protocol's
    assumption), and readable, so an operator who finds a lease in Redis knows whose it is."""
    return f"cli:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def _move(
    client: SyncClient,
    dlq: bytes,
    entries: Sequence[tuple[bytes, Any]],
    patterns: Sequence[DlqPattern],
    *,
    owner: str,
) -> RequeueOutcome:
    """Plan each entry, then move the plannable ones: those whose target the script may write (all of
    them on one server) with one script call, the others by :func:`eventbus.moves.move_across`, one
    call per target. The outcome lists them in the DLQ's order."""
    outcome = RequeueOutcome()
    keys: list[bytes] = [dlq]
    index: dict[bytes, int] = {}
    args: list[Any] = []
    planned: list[tuple[str, bytes]] = []
    across: dict[bytes, list[tuple[str, list[bytes]]]] = {}
    home = key_slot(dlq) if is_cluster_client(client) else None
    for raw_id, flat in entries:
        entry_id = raw_id.decode()
        try:
            target, fields = requeue_plan(dlq, entry_id, pairs(flat), patterns)
        except NotRequeueable as exc:
            outcome.failed.append({"dlq_id": entry_id, "reason": str(exc)})
            continue
        if home is not None and key_slot(target) != home:
            across.setdefault(target, []).append((entry_id, [part for pair in fields for part in pair]))
            continue
        if target not in index:
            keys.append(target)
            index[target] = len(keys)  # Lua's KEYS is 1-based
        args += [entry_id, index[target], 2 * len(fields)]
        args += [part for pair in fields for part in pair]
        planned.append((entry_id, target))
    if planned:
        replies = client.register_script(source("requeue"))(keys=keys, args=args)
        for (entry_id, target), reply in zip(planned, replies, strict=True):
            if reply is None:
                outcome.missing.append(entry_id)
            elif reply.startswith(b"!"):
                reason = f"Redis refused the XADD: {display_text(reply[1:])}"
                outcome.failed.append({"dlq_id": entry_id, "reason": reason})
            else:
                outcome.requeued.append(_requeued(entry_id, target, reply.decode()))
    for target, moving in across.items():
        moved = moves.move_across(client, dlq, target, moving, owner=owner)
        outcome.requeued += [_requeued(entry_id, target, new_id) for entry_id, new_id in moved.added]
        outcome.missing += moved.missing
        outcome.failed += [{"dlq_id": entry_id, "reason": reason} for entry_id, reason in moved.failed]
    if across:
        order = {raw_id.decode(): i for i, (raw_id, _) in enumerate(entries)}
        outcome.requeued.sort(key=lambda row: order[row["dlq_id"]])
        outcome.missing.sort(key=order.__getitem__)
        outcome.failed.sort(key=lambda row: order[row["dlq_id"]])
    return outcome


def _requeued(entry_id: str, target: bytes, new_id: str) -> dict[str, str]:
    return {"dlq_id": entry_id, "stream": display_text(target), "new_id": new_id}


def requeue_ids(
    client: SyncClient, dlq: bytes, ids: Sequence[str], patterns: Sequence[DlqPattern], *, batch: int
) -> RequeueOutcome:
    """Requeue the named DLQ entries, ``batch`` per script call; IDs not in the DLQ are ``missing``."""
    require_dlq(dlq, patterns)
    total = RequeueOutcome()
    owner = mover_name()
    wanted = list(dict.fromkeys(ids))
    for start in range(0, len(wanted), batch):
        chunk = wanted[start : start + batch]
        pipe = client.pipeline(transaction=False)
        for entry_id in chunk:
            pipe.execute_command("XRANGE", dlq, entry_id, entry_id, "COUNT", 1)
        found = [reply[0] for reply in pipe.execute() if reply]
        present = {raw_id.decode() for raw_id, _ in found}
        total.missing += [entry_id for entry_id in chunk if entry_id not in present]
        _merge(total, _move(client, dlq, found, patterns, owner=owner))
    return total


def requeue_up_to(
    client: SyncClient, dlq: bytes, up_to: str, patterns: Sequence[DlqPattern], *, batch: int
) -> RequeueOutcome:
    """Requeue every DLQ entry not newer than ``up_to``, oldest first, one script call per ``batch``.

    Entries that arrive meanwhile are newer than ``up_to`` and stay; failed ones stay and are passed.
    On a cluster the batches' steps are pipelined (:mod:`eventbus.requeue_run`).
    """
    require_dlq(dlq, patterns)
    owner = mover_name()
    if is_cluster_client(client):  # the steps of consecutive batches pipelined, every node at work at once
        run = requeue_run.requeue_up_to(client, dlq, up_to, patterns, batch=batch, owner=owner)
        return RequeueOutcome(requeued=run.requeued, missing=run.missing, failed=run.failed)
    total = RequeueOutcome()
    cursor = "-"
    while True:
        raw = client.execute_command("XRANGE", dlq, cursor, up_to, "COUNT", batch)
        if not raw:
            return total
        _merge(total, _move(client, dlq, raw, patterns, owner=owner))
        if len(raw) < batch:
            return total
        cursor = "(" + raw[-1][0].decode()


def _merge(total: RequeueOutcome, part: RequeueOutcome) -> None:
    total.requeued += part.requeued
    total.missing += part.missing
    total.failed += part.failed


def claim(
    client: SyncClient, key: bytes, group: bytes, *, consumer: bytes, min_idle: int, ids: Sequence[str] | None
) -> dict[str, list[str]]:
    """XCLAIM ``ids`` (or sweep the whole PEL with XAUTOCLAIM when None) for ``consumer``.

    Returns ``claimed``; ``skipped`` (named IDs not claimed: not pending, gone from the stream, or used
    more recently than ``min_idle``) and, for a sweep, ``deleted`` (pending, but their message is gone:
    Redis 7 drops them from the PEL).
    """
    if ids is not None:
        reply = client.execute_command("XCLAIM", key, group, consumer, min_idle, *ids)  # type: ignore[no-untyped-call]  # redis-py leaves execute_command unannotated; mypy applies untyped_calls_exclude to no union client
        claimed = [item[0].decode() for item in reply if item]
        return {"claimed": claimed, "skipped": [i for i in ids if i not in set(claimed)], "deleted": []}
    claimed, deleted, cursor = [], [], "0-0"
    for _ in range(MAX_SWEEPS):
        reply = client.execute_command("XAUTOCLAIM", key, group, consumer, min_idle, cursor, "COUNT", 1000)  # type: ignore[no-untyped-call]  # redis-py leaves execute_command unannotated; mypy applies untyped_calls_exclude to no union client
        claimed += [item[0].decode() for item in reply[1] if item]
        deleted += [raw.decode() for raw in (reply[2] if len(reply) > 2 else [])]
        cursor = reply[0].decode()
        if cursor == "0-0":
            break
    return {"claimed": claimed, "skipped": [], "deleted": deleted}
