"""``python -m eventbus requeue --all`` on Redis Cluster: the batches in a row, their steps pipelined.

One batch after another, a dead letter bound for another slot takes five round trips (read, lease, add,
release, forget: :mod:`eventbus.moves`), the DLQ's node and the targets' nodes each waiting for the
other. Here each round trip is ONE pipeline (:func:`eventbus.moves.execute`), written to every node
before any is read, carrying a step of up to five consecutive batches (a program with a batch script
that reads and leases in one call pipelines the same steps over fewer round trips):

* to the DLQ's node: the release of batch N, the lease of batch N+2 (``lua/move_lease.lua``, for its
  entries bound for another slot) with the one-script move of its entries bound for the DLQ's own slot
  (``lua/requeue.lua``), and the XRANGE reading batch N+3;
* to the targets' nodes: the forget of batch N-1 and the add of batch N+1.

Why this is as safe as the steps one after another: each step of a batch is sent only once the step
before it, for that batch, has answered (the read before the lease, the lease before the add, and so
on), so whatever a kill interrupts, every dead letter is in one of the states the protocol allows
(:mod:`eventbus.moves`: leased; added and recorded, still leased; released, its record left to
expire), and the steps of different batches touch different entries. The XRANGE of a batch starts after
the last ID the batch before it read, so no entry is read twice. A run killed part-way leaves its
leases, as one batch at a time did: a later run reports those entries failed (another requeue is moving
them) until the leases expire, then finishes them from their records, adding nothing twice.

Unlike such a batch script, the client plans each entry here by the conventions
(:func:`eventbus.conventions.requeue_plan`), as the command line always has, so a release XDELs the
added entries one by one: no XTRIM, which needs the batch's place in the DLQ.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from redis.crc import key_slot

from . import moves
from .cli_reads import pairs
from .conventions import DlqPattern, NotRequeueable, requeue_plan
from .scripts import source
from .text import display_text

_REQUEUE = source("requeue")
_REQUEUE_SHA = moves.sha_of(_REQUEUE)


@dataclass(slots=True)
class Outcome:
    """What moved, in rows the command line prints (``dlq_id``, ``stream``, ``new_id``)."""

    requeued: list[dict[str, str]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    failed: list[dict[str, str]] = field(default_factory=list)

    def fail(self, entry_id: str, reason: str) -> None:
        self.failed.append({"dlq_id": entry_id, "reason": reason})

    def moved(self, entry_id: str, target: bytes, new_id: str) -> None:
        self.requeued.append({"dlq_id": entry_id, "stream": display_text(target), "new_id": new_id})


@dataclass(slots=True)
class _Planned:
    """A batch read and planned: its entries for the DLQ's slot (one script) and for others (to lease)."""

    local: list[tuple[str, bytes]] = field(default_factory=list)  # (DLQ ID, target) in the script's order
    keys: list[bytes] = field(default_factory=list)
    args: list[object] = field(default_factory=list)
    across: dict[bytes, list[tuple[str, list[bytes]]]] = field(default_factory=dict)

    @property
    def across_ids(self) -> list[str]:
        return [entry_id for planned in self.across.values() for entry_id, _ in planned]


def requeue_up_to(
    client: Any, dlq: bytes, up_to: str, patterns: Sequence[DlqPattern], *, batch: int, owner: str
) -> Outcome:
    """Requeue every entry of ``dlq`` (on a cluster client) not newer than ``up_to``, oldest first, in
    batches of ``batch``; the outcome lists the entries in the DLQ's order."""
    return _Run(client, dlq, up_to, patterns, batch=batch, owner=owner).run()


class _Run:
    def __init__(
        self, client: Any, dlq: bytes, up_to: str, patterns: Sequence[DlqPattern], *, batch: int, owner: str
    ) -> None:
        self.client, self.dlq, self.up_to, self.patterns = client, dlq, up_to, patterns
        self.batch, self.owner, self.home = batch, owner, key_slot(dlq)
        self.outcome = Outcome()
        self.order: dict[str, int] = {}
        self.cursor: str | None = "-"  # where the next XRANGE starts; None once the last batch was read
        self.planned: _Planned | None = None  # read, to lease (and move the local ones)
        self.leased: list[moves.Flat] = []  # leased, to add
        self.added: moves.Release | None = None  # added, to release
        self.released: moves.Release | None = None  # released, to forget

    def run(self) -> Outcome:
        while self.cursor is not None or self.planned or self.leased or self.added or self.released:
            self._round()
        rank = self.order.__getitem__
        self.outcome.requeued.sort(key=lambda row: rank(row["dlq_id"]))
        self.outcome.missing.sort(key=rank)
        self.outcome.failed.sort(key=lambda row: rank(row["dlq_id"]))
        return self.outcome

    def _round(self) -> None:
        planned, leased, added, released = self.planned, self.leased, self.added, self.released
        commands: list[moves.Command] = []
        if added:
            commands += moves.queue_release(added)
        local_at = len(commands)
        if planned and planned.local:
            commands.append(("EVALSHA", _REQUEUE_SHA, len(planned.keys), *planned.keys, *planned.args))
        lease_at = len(commands)
        if planned and planned.across:
            commands.append(moves.queue_lease(self.dlq, planned.across_ids, owner=self.owner))
        read_at = len(commands)
        if self.cursor is not None:
            commands.append(("XRANGE", self.dlq, self.cursor, self.up_to, "COUNT", self.batch))
        if released:
            commands += moves.queue_forget(released)
        add_at = len(commands)
        commands += [moves.queue_add(self.dlq, item) for item in leased]
        replies = moves.execute(self.client, commands, scripts={_REQUEUE_SHA: _REQUEUE})
        # Every step sent has answered: each batch moves on to its next step.
        self.released, self.added, self.leased, self.planned = added, None, [], None
        if leased:
            self.added = self._added(leased, replies[add_at:])
        if planned:
            if planned.local:
                self._local(planned.local, replies[local_at])
            if planned.across:
                self.leased = self._leased(planned, replies[lease_at])
        if self.cursor is not None:
            self._read(replies[read_at])

    def _read(self, raw: list[Any]) -> None:
        """Plan the batch just read: each entry's target and fields by the conventions."""
        planned = _Planned(keys=[self.dlq])
        index: dict[bytes, int] = {}
        for raw_id, flat in raw:
            entry_id = raw_id.decode()
            self.order[entry_id] = len(self.order)
            try:
                target, fields = requeue_plan(self.dlq, entry_id, pairs(flat), self.patterns)
            except NotRequeueable as exc:
                self.outcome.fail(entry_id, str(exc))
                continue
            values = [part for pair in fields for part in pair]
            if key_slot(target) != self.home:
                planned.across.setdefault(target, []).append((entry_id, values))
                continue
            if target not in index:
                planned.keys.append(target)
                index[target] = len(planned.keys)  # Lua's KEYS is 1-based
            planned.args += [entry_id, index[target], len(values), *values]
            planned.local.append((entry_id, target))
        self.planned = planned if planned.local or planned.across else None
        self.cursor = "(" + raw[-1][0].decode() if len(raw) == self.batch else None

    def _local(self, local: list[tuple[str, bytes]], replies: list[Any]) -> None:
        """``lua/requeue.lua``'s replies: each entry moved in one step, gone, or refused."""
        for (entry_id, target), reply in zip(local, replies, strict=True):
            if reply is None:
                self.outcome.missing.append(entry_id)
            elif reply.startswith(b"!"):
                self.outcome.fail(entry_id, f"Redis refused the XADD: {display_text(reply[1:])}")
            else:
                self.outcome.moved(entry_id, target, reply.decode())

    def _leased(self, planned: _Planned, states: list[Any]) -> list[moves.Flat]:
        """The lease's replies: the entries leased to this run, per target, to add next."""
        state = dict(zip(planned.across_ids, (int(s) for s in states), strict=True))
        out: list[moves.Flat] = []
        for target, entries in planned.across.items():
            mine = []
            for entry_id, values in entries:
                if state[entry_id] == 0:
                    self.outcome.missing.append(entry_id)
                elif state[entry_id] == 2:
                    self.outcome.fail(entry_id, moves.BUSY)
                else:
                    mine.append((entry_id, values))
            if mine:
                out.append(moves.Flat(target, tuple(i for i, _ in mine), tuple(v for _, v in mine)))
        return out

    def _added(self, leased: list[moves.Flat], replies: Sequence[Any]) -> moves.Release:
        """The adds' replies: count what was added, and what its release drops (every lease of the batch)."""
        results = [moves.add_outcome(item, reply) for item, reply in zip(leased, replies, strict=True)]
        for item, moved in zip(leased, results, strict=True):
            for entry_id, new_id in moved.added:
                self.outcome.moved(entry_id, item.target, new_id)
            for entry_id, reason in moved.failed:
                self.outcome.fail(entry_id, reason)
        return moves.release_plan(self.dlq, leased, results, order=(), at_head=False)
