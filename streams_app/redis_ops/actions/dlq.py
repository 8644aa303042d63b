"""Dead-letter queues: requeue, delete and purge entries, each DLQ read by its convention.

Listing a DLQ's entries is a read: :mod:`..reads.dlq`.

**requeue** moves each dead letter inside a Lua script: still there? XADD to its stream + XDEL
(``lua/requeue.lua`` for entries planned in Python; ``lua/requeue_rule.lua`` for the bulk path, which
reads and rewrites a whole batch inside Redis). Two operators requeueing the same entry make one new
entry; a re-run job finds moved entries gone.

On Redis Cluster that one script serves the targets in the DLQ's hash slot (``{orders}:dlq`` ->
``orders``: the event bus names its DLQs so). A target in another slot (``orders:dlq``, the
pre-cluster naming, -> ``orders``; an entry naming another stream) cannot be written by a script
running on the DLQ's node: those entries take the stepwise path of :mod:`.moves`, with the same
guarantees (never lost, never doubled, a killed job resumes exactly). Nothing is refused with
CROSSSLOT: the work is split by slot before it is sent.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from eventbus.connection import SyncClient
from eventbus.conventions import EVENTBUS_OR_STREAMS, EVENTBUS_PREFIX, REQUEUED_FROM_FIELD, RETRIES_FIELD
from eventbus.moves import BUSY, LEASE_MS, Packed, lease_key

from ..client import get_client, is_cluster, slot_of
from ..commands import entries_by_id, require_stream, stream_read
from ..conventions import detect_dlq, dlq_patterns, requeue_plan
from ..errors import OpsError, translated
from ..ids import parse_id, parse_position
from ..parsers import parse_entry, reply_text
from ..types import Entry
from ._common import MAX_BATCH, MAX_IDS, _ids, _key, _positive, _script
from .moves import add_packed_and_release, move_across


@dataclass(frozen=True, slots=True)
class Requeued:
    dlq_id: str
    stream: bytes
    new_id: str


@dataclass(frozen=True, slots=True)
class RequeueFailure:
    """A DLQ entry left where it was: no target could be planned for it, or the target refused."""

    dlq_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class RequeueResult:
    requeued: tuple[Requeued, ...]
    missing: tuple[str, ...]  # no longer in the DLQ (requeued or deleted by someone else)
    failed: tuple[RequeueFailure, ...] = ()  # still in the DLQ: see each reason


@dataclass(frozen=True, slots=True)
class RequeueBatch:
    result: RequeueResult  # with ``itemize=False``, ``result.requeued`` is empty: see ``moved``
    cursor: str | None  # last DLQ ID handled; None when nothing is left up to ``up_to``
    scanned: int
    moved: int = 0  # entries requeued by this batch (``len(result.requeued)`` when itemized)
    #: how many of them went to each stream, itemized or not (a bulk job's audit row counts per target)
    per_target: dict[bytes, int] = field(default_factory=dict)
    last: str | None = None  # the last DLQ ID this batch read, whether or not the batch was full


# ---------------------------------------------------------------- DLQ: requeue, delete, purge


def requeue(conn: str, dlq_key: bytes, *, ids: Sequence[str], owner: str | None = None) -> RequeueResult:
    """Requeue the given DLQ entries (at most 1000): each one, atomically, exactly once.

    The entries are read (one pipeline), each one's target and payload is planned in Python by its
    convention (:func:`conventions.requeue_plan`), then one Lua call moves them all, each entry as its
    own "still there? XADD + XDEL" step. Entries gone by then are ``missing``; entries no convention
    can send anywhere, or whose target refuses the XADD, stay in the DLQ and are ``failed``.

    On a cluster, entries bound for another slot move by :func:`.moves.move_across` under ``owner``
    (a job passes its own, so a resumed run may finish what a killed one leased; a request gets a
    fresh one).
    """
    _key(dlq_key, "DLQ key")
    wanted = _ids(ids)
    client = get_client(conn)
    with translated(conn):
        found, _ = entries_by_id(conn, client, dlq_key, wanted)
        entries = [entry for entry in found if entry is not None]
        missing = [entry_id for entry_id, entry in zip(wanted, found, strict=True) if entry is None]
        result = _requeue_entries(conn, client, dlq_key, entries, owner=owner or _request_owner())
    return RequeueResult(
        requeued=result.requeued, missing=tuple(missing) + result.missing, failed=result.failed
    )


def requeue_range(
    conn: str,
    dlq_key: bytes,
    *,
    up_to: str,
    after: str | None = None,
    batch: int = 500,
    owner: str | None = None,
    itemize: bool = True,
) -> RequeueBatch:
    """Requeue one batch of the oldest DLQ entries after ``after`` and not newer than ``up_to``.

    The bulk job calls this in a loop, passing back ``cursor`` as ``after`` until it is None. It is
    safe to re-run from any older cursor (or from the start) after a crash: requeued entries were
    deleted from the DLQ in the same script that copied them, so they are simply not read again.
    Entries newer than ``up_to`` (arrived after the operator looked) are never read. Failed entries
    stay in the DLQ and the cursor moves past them.

    How a batch is planned depends on the convention:

    * when requeueing is a field rewrite (``{stream}:dlq`` of eventbus or the seed module, configured
      patterns), the rewrite is handed to ``lua/requeue_rule.lua`` as a rule and the batch is read,
      rewritten and moved inside Redis in ONE call: nothing travels per entry, which is what makes a
      bulk requeue many times faster than a per-entry loop (docs/performance.md#goals-and-floors). An entry the rule cannot place is left alone and
      planned in Python like the next case;
    * otherwise (OmniDaemon re-encodes its JSON) the batch is read, each entry planned by
      :func:`conventions.requeue_plan`, and moved by ONE call of ``lua/requeue.lua``.

    On a cluster the rule script writes only the one target it may declare, in the DLQ's slot (the
    key's own stream: ``{orders}:dlq`` -> ``orders``); every other entry it rewrites just the same,
    leases to ``owner`` and returns, and the client adds it on its target's node
    (:func:`.moves.add_packed_and_release`): the entries still never go through Python planning, nor
    are they even read here (the script packs them, one string per target, and the client passes that
    on), which is what keeps a bulk requeue across slots within reach of one within a slot.

    ``itemize=False`` is for a caller that only counts (the requeue-all job): the entries the rule
    script moved come back as the count ``moved`` instead of one :class:`Requeued` each, which saves
    building, sending and parsing three replies per entry (a fifth of a batch's cost). Missing and
    failed entries are itemized either way.
    """
    _key(dlq_key, "DLQ key")
    upper = str(parse_position(up_to, what="up_to").highest)
    start = "(" + str(parse_id(after, allow_bare=False, what="after")) if after else "-"
    batch = _positive(batch, "batch", cap=MAX_BATCH)
    client = get_client(conn)
    owner = owner or _request_owner()
    with translated(conn):
        rule = _requeue_rule(dlq_key)
        if rule is None:
            raw = stream_read(conn, client, dlq_key, "XRANGE", dlq_key, start, upper, "COUNT", batch)
            result = _requeue_entries(conn, client, dlq_key, [parse_entry(item) for item in raw], owner=owner)
            scanned, last = len(raw), reply_text(raw[-1][0]) if raw else None
            moved = len(result.requeued)
            per_target = _per_target(result.requeued)
        else:
            keys = [dlq_key]
            placement: list[bytes | int] = [b"any", b"", b""]
            if is_cluster(conn):
                # Targets in the DLQ's slot are written by the script; others are leased and returned.
                keys.append(lease_key(dlq_key))
                hint = rule[1]
                if hint and slot_of(hint) == slot_of(dlq_key):
                    keys.append(hint)
                placement = [b"cluster", owner.encode(), LEASE_MS]
            args = [start, upper, batch, *rule[:5], *placement, b"all" if itemize else b"count", *rule[5:]]
            reply = _script(client, "requeue_rule")(keys=keys, args=args)
            scanned, last = int(reply[0]), reply_text(reply[1])
            if not scanned:
                require_stream(conn, client.type(dlq_key))
            result, moved, per_target = _rule_outcomes(conn, dlq_key, reply, owner=owner, itemize=itemize)
    if not itemize:
        result = RequeueResult(requeued=(), missing=result.missing, failed=result.failed)
    return RequeueBatch(
        result=result, cursor=last if scanned == batch else None, scanned=scanned, moved=moved, per_target=per_target,
        last=last,
    )


def requeue_left(conn: str, dlq_key: bytes, *, after: str | None, up_to: str) -> bool:
    """Whether the DLQ still holds an entry after ``after`` (from its start when None) and not newer
    than ``up_to``: a bulk requeue's check, before it calls itself done, that the short batch which
    said "nothing left" was answered by a server that holds the DLQ as the primary does. Right after
    a failover a connection can reach a server that is not (yet, or any longer) the primary, whose
    empty answer would otherwise end the job with dead letters left behind."""
    _key(dlq_key, "DLQ key")
    upper = str(parse_position(up_to, what="up_to").highest)
    start = "(" + str(parse_id(after, allow_bare=False, what="after")) if after else "-"
    client = get_client(conn)
    with translated(conn):
        return bool(stream_read(conn, client, dlq_key, "XRANGE", dlq_key, start, upper, "COUNT", 1))


def _per_target(requeued: Sequence[Requeued], into: dict[bytes, int] | None = None) -> dict[bytes, int]:
    counts = {} if into is None else into
    for item in requeued:
        counts[item.stream] = counts.get(item.stream, 0) + 1
    return counts


EVENTBUS_SWITCH_FIELD = b"dlq_original_stream"
"""The field whose presence makes a ``{stream}:dlq`` entry eventbus's rather than the seed module's."""


def _requeue_rule(dlq_key: bytes) -> list[bytes] | None:
    """``requeue_rule.lua``'s ARGV[4..8] then ARGV[13..] for this DLQ (the caller puts the placement,
    ARGV[9..11], and the reply's shape, ARGV[12], between them), or None when requeue is not a field
    rewrite.

    Mirrors :func:`conventions.requeue_plan` for the conventions whose plan keeps a subsequence of the
    entry's fields and takes its target from the key or one field (the tests check the two agree
    entry by entry). Where the rule cannot decide, the script declines and requeue_plan decides.
    """
    kind = detect_dlq(dlq_key)
    if kind is None:
        return None
    if kind.convention == EVENTBUS_OR_STREAMS:
        if not kind.source_hint:
            return None
        return [b"switch", kind.source_hint, EVENTBUS_SWITCH_FIELD, EVENTBUS_PREFIX, REQUEUED_FROM_FIELD,
                RETRIES_FIELD, REQUEUED_FROM_FIELD]  # fmt: skip
    pattern = next((p for p in dlq_patterns() if p.name == kind.convention), None)
    if pattern is None:  # OmniDaemon
        return None
    hidden = sorted(pattern.hidden_fields)
    if pattern.target_kind == "field":
        return [b"field", b"", pattern.target_arg, b"", REQUEUED_FROM_FIELD, *hidden]
    hint = pattern.source_hint(dlq_key)
    if not hint:
        return None
    return [b"fixed", hint, b"", b"", REQUEUED_FROM_FIELD, *hidden]


def _request_owner() -> str:
    """The mover's name of one call made for a request (a job passes its own, ``job:<id>``)."""
    return "request:" + uuid.uuid4().hex


@dataclass(slots=True)
class RuleBatch:
    """One reply of ``requeue_rule.lua`` read: what the script did, and what is left for the client."""

    scanned: int
    last: str | None  # the last DLQ ID read
    moved: int  # entries the script moved (to the target in the DLQ's slot)
    per_target: dict[bytes, int]  # of those, per stream
    requeued: list[Requeued]  # of those, each (itemized replies only)
    failed: list[RequeueFailure]  # left in the DLQ: leased to another mover, or the XADD refused
    declined: list[str]  # left for the conventions to plan (:func:`requeue`)
    packs: list[Packed]  # leased to the caller, per target in another slot: to add there
    still: list[str]  # the batch's IDs still in the DLQ, as read
    at_head: bool  # nothing in the DLQ is older than the batch


def rule_batch(reply: Sequence[Any], *, itemize: bool) -> RuleBatch:
    """Read ``requeue_rule.lua``'s reply (see the script for its layout); with ``itemize=False``
    the entries the script moved are not named, only counted (``reply[3]``, ``reply[6]`` per target)."""
    per_target: dict[bytes, int] = {}
    for target, count in zip(reply[2], reply[6], strict=True):
        if int(count):
            per_target[target] = per_target.get(target, 0) + int(count)
    requeued: list[Requeued] = []
    failed: list[RequeueFailure] = []
    declined: list[str] = []
    leased: dict[int, list[str]] = {}  # target's index -> IDs, in the order of its packed entries
    still: list[str] = []
    targets = [b"", *reply[2]]
    for raw_id, index, outcome in zip(reply[7::3], reply[8::3], reply[9::3], strict=True):
        entry_id = raw_id.decode()
        if outcome == 1:  # leased to the caller: most entries of a batch bound for another slot
            ids = leased.get(index)
            if ids is None:
                ids = leased[index] = []
            ids.append(entry_id)
        elif outcome is None:
            declined.append(entry_id)
        elif outcome == b"~":
            failed.append(RequeueFailure(entry_id, BUSY))
        elif outcome[:1] == b"!":
            failed.append(RequeueFailure(entry_id, f"Redis refused the XADD: {reply_text(outcome[1:])}"))
        else:
            requeued.append(Requeued(dlq_id=entry_id, stream=targets[index], new_id=outcome.decode()))
            continue
        still.append(entry_id)
    packs = [Packed(targets[index], tuple(ids), reply[4][index - 1]) for index, ids in leased.items()]
    scanned = int(reply[0])
    return RuleBatch(
        scanned=scanned, last=reply_text(reply[1]) if scanned else None,
        moved=len(requeued) if itemize else int(reply[3]), per_target=per_target, requeued=requeued,
        failed=failed, declined=declined, packs=packs, still=still, at_head=bool(reply[5]),
    )  # fmt: skip


def _rule_outcomes(
    conn: str, dlq_key: bytes, reply: Sequence[Any], *, owner: str, itemize: bool
) -> tuple[RequeueResult, int, dict[bytes, int]]:
    """Turn ``requeue_rule.lua``'s reply into a result: add the entries it leased (cluster) to their
    targets on their own nodes, and plan and move declined entries in Python. Returns the result,
    how many entries were requeued in all and how many to each stream; with ``itemize=False`` the result
    lists none of them."""
    batch = rule_batch(reply, itemize=itemize)
    moved, per_target, requeued, failed = batch.moved, batch.per_target, batch.requeued, batch.failed
    if batch.packs:
        outcomes = add_packed_and_release(conn, dlq_key, batch.packs, order=batch.still, at_head=batch.at_head)
        for item, done in zip(batch.packs, outcomes, strict=True):
            if itemize:
                requeued += [Requeued(entry_id, item.target, new_id) for entry_id, new_id in done.added]
            moved += len(done.added)
            if done.added:
                per_target[item.target] = per_target.get(item.target, 0) + len(done.added)
            failed += [RequeueFailure(entry_id, reason) for entry_id, reason in done.failed]
    rest = requeue_declined(conn, dlq_key, batch.declined, owner=owner)
    requeued += rest.requeued if itemize else ()
    moved += len(rest.requeued)
    _per_target(rest.requeued, per_target)
    failed += rest.failed
    if itemize:
        moved = len(requeued)
    return RequeueResult(requeued=tuple(requeued), missing=rest.missing, failed=tuple(failed)), moved, per_target


def requeue_declined(conn: str, dlq_key: bytes, declined: Sequence[str], *, owner: str) -> RequeueResult:
    """The entries ``requeue_rule.lua`` declined, planned by the conventions and moved (:func:`requeue`)."""
    requeued: list[Requeued] = []
    missing: list[str] = []
    failed: list[RequeueFailure] = []
    for start in range(0, len(declined), MAX_IDS):
        rest = requeue(conn, dlq_key, ids=declined[start : start + MAX_IDS], owner=owner)
        requeued += rest.requeued
        missing += rest.missing
        failed += rest.failed
    return RequeueResult(requeued=tuple(requeued), missing=tuple(missing), failed=tuple(failed))


def _requeue_entries(
    conn: str, client: SyncClient, dlq_key: bytes, entries: Sequence[Entry], *, owner: str
) -> RequeueResult:
    """Plan each entry and move them: those whose target shares the DLQ's slot (all of them on
    standalone) in one script call, the others by :func:`.moves.move_across`, one call per target."""
    keys: list[bytes] = [dlq_key]
    key_index: dict[bytes, int] = {}
    args: list[Any] = []
    planned: list[tuple[str, bytes]] = []
    failed: list[RequeueFailure] = []
    across: dict[bytes, list[tuple[str, list[bytes]]]] = {}
    home = slot_of(dlq_key) if is_cluster(conn) else None
    for entry in entries:
        entry_id = entry.id
        try:
            target, fields = requeue_plan(dlq_key, entry_id, list(entry.fields))
        except OpsError as exc:
            failed.append(RequeueFailure(entry_id, exc.message))
            continue
        if home is not None and slot_of(target) != home:
            across.setdefault(target, []).append((entry_id, [x for pair in fields for x in pair]))
            continue
        index = key_index.get(target)
        if index is None:
            keys.append(target)
            index = key_index[target] = len(keys)  # Lua's KEYS is 1-based
        args += (entry_id, index, 2 * len(fields))
        for name, value in fields:
            args += (name, value)
        planned.append((entry_id, target))
    requeued: list[Requeued] = []
    missing: list[str] = []
    if planned:
        replies = _script(client, "requeue")(keys=keys, args=args)
        for (entry_id, target), reply in zip(planned, replies, strict=True):
            if reply is None:
                missing.append(entry_id)
            elif reply.startswith(b"!"):
                failed.append(RequeueFailure(entry_id, f"Redis refused the XADD: {reply_text(reply[1:])}"))
            else:
                requeued.append(Requeued(dlq_id=entry_id, stream=target, new_id=reply_text(reply)))
    for target, moves in across.items():
        moved = move_across(conn, dlq_key, target, moves, owner=owner)
        requeued += [
            Requeued(dlq_id=entry_id, stream=target, new_id=new_id) for entry_id, new_id in moved.added
        ]
        missing += moved.missing
        failed += [RequeueFailure(entry_id, reason) for entry_id, reason in moved.failed]
    return RequeueResult(requeued=tuple(requeued), missing=tuple(missing), failed=tuple(failed))


def dlq_delete(conn: str, dlq_key: bytes, *, ids: Sequence[str]) -> int:
    """XDEL the given DLQ entries; returns how many existed."""
    _key(dlq_key, "DLQ key")
    wanted = _ids(ids)
    with translated(conn):
        return int(get_client(conn).execute_command("XDEL", dlq_key, *wanted))  # type: ignore[no-untyped-call]  # redis-py leaves execute_command unannotated


def dlq_purge(conn: str, dlq_key: bytes, *, up_to: str, batch: int = 1000) -> int:
    """Delete every DLQ entry not newer than ``up_to``, ``batch`` per Lua call; returns the count.

    Entries that arrive while purging are newer than ``up_to`` and survive. Each call deletes what it
    reads, so the loop ends after (entries to delete / batch) calls.
    """
    _key(dlq_key, "DLQ key")
    upper = str(parse_position(up_to, what="up_to").highest)
    batch = _positive(batch, "batch", cap=MAX_BATCH)
    client = get_client(conn)
    total = 0
    with translated(conn):
        require_stream(conn, client.type(dlq_key))
        script = _script(client, "purge")
        while True:
            deleted, _last = script(keys=[dlq_key], args=[upper, batch])
            total += int(deleted)
            if int(deleted) == 0:
                return total
