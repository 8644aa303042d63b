"""A bulk requeue's batches in a row, with the steps of a move across slots pipelined.

:func:`.dlq.requeue_range` moves one batch to the end: on Redis Cluster, a batch bound for another
slot is leased (the rule script), added on the target's node, released and forgotten, four round
trips, the two nodes each waiting for the other. :class:`RequeueRun` is the requeue-all job's loop
over those batches instead. Each :meth:`RequeueRun.step`:

1. reads the reply of batch N+1's rule script (reading and leasing it), written to the DLQ's node the
   step before on a connection of its own, and at once writes batch N+2's the same way, so the DLQ's
   node works on the next batch while this client handles the replies (the client's work per batch
   would otherwise add to the node's: docs/performance.md#figures-behind-the-design);
2. sends ONE pipeline, written to every node before any is read: the release of batch N to the DLQ's
   node (it runs there after batch N+2's script), the forget of N-1 and the add of N+1 to the targets'
   nodes.

Why this is as safe as the four steps one after another: :mod:`eventbus.moves`. Each step of a batch
starts only once the step before it, for that batch, has answered: N+1 is added only after its
script's reply was read, released a step after its add answered, forgotten a step after its release
did. The steps of different batches touch different entries (a batch's script reads after the last ID
of the one before), and the releases come in the batches' order, so a batch's XTRIM drops only its own
entries, as before. A kill leaves the protocol's states for at most four batches. A script the node
does not answer (it lost the script or the slot, or the connection broke) is sent again through the
cluster's pipeline, as redis-py's own retry would: the same owner reading a batch again leases it again
and finds its records.

What a caller may rely on:

* :attr:`RequeueRun.cursor` is where a run resumed after a kill starts: every entry up to it left the
  DLQ or stays there for good (failed); the batches after it may be leased or added, and a re-read
  (same owner) finishes them from their records, adding nothing twice.
* every :class:`.dlq.RequeueBatch` a step returns counts what left the DLQ in that step, so that at
  each return the counts and the DLQ agree (a job's saved count and the DLQ's length then tell what a
  killed run moved after its save).
* :meth:`RequeueRun.drain` finishes the batches in flight without reading more: after it nothing is
  leased or added-but-not-released, and the cursor is the last ID read. A job drains before it saves,
  so a cancelled job leaves no copy of an entry still in the DLQ, and no lease.

On one server, and for a DLQ requeue cannot rewrite in a script, every step is one
:func:`.dlq.requeue_range` call: nothing there is leased.
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from redis.exceptions import RedisError

from eventbus import moves

from ..client import get_client, is_cluster, slot_of
from ..commands import require_stream
from ..errors import translated
from ..ids import parse_id, parse_position
from ..parsers import reply_text
from ._common import MAX_BATCH, ZERO_ID, _positive, _source
from .dlq import (
    RequeueBatch,
    Requeued,
    RequeueFailure,
    RequeueResult,
    RuleBatch,
    _request_owner,
    _requeue_rule,
    requeue_declined,
    requeue_range,
    rule_batch,
)


@dataclass(slots=True)
class _Tally:
    """What left the DLQ (or was found staying) since the last step returned."""

    itemize: bool
    requeued: list[Requeued] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    failed: list[RequeueFailure] = field(default_factory=list)
    moved: int = 0
    per_target: dict[bytes, int] = field(default_factory=dict)
    scanned: int = 0

    def count(self, stream: bytes, requeued: list[Requeued] | int) -> None:
        n = requeued if isinstance(requeued, int) else len(requeued)
        if n:
            self.moved += n
            self.per_target[stream] = self.per_target.get(stream, 0) + n
        if self.itemize and not isinstance(requeued, int):
            self.requeued += requeued

    def batch(self, cursor: str | None, last: str | None) -> RequeueBatch:
        result = RequeueResult(requeued=tuple(self.requeued), missing=tuple(self.missing), failed=tuple(self.failed))
        return RequeueBatch(result=result, cursor=cursor, scanned=self.scanned, moved=self.moved,
                            per_target=self.per_target, last=last)  # fmt: skip


@dataclass(slots=True)
class _Leased:
    """A batch the rule script read and leased, waiting for its add."""

    rule: RuleBatch
    at_head: bool  # nothing older than it in the DLQ once the batches before it are released


@dataclass(slots=True)
class _Added:
    """A batch added to its targets, waiting for its release."""

    last: str | None
    release: moves.Release
    outcomes: list[tuple[moves.Packed, moves.Moved]]
    at_head: bool


@dataclass(slots=True)
class _Ahead:
    """A rule script written to the DLQ's node on a connection of its own, its reply not read yet."""

    pool: Any
    connection: Any  # None: the write failed, the script is yet to be sent the cluster's way
    command: moves.Command


class RequeueRun:
    """The batches of one bulk requeue of ``dlq_key`` up to ``up_to`` after ``after`` (see the module docstring)."""

    def __init__(
        self,
        conn: str,
        dlq_key: bytes,
        *,
        up_to: str,
        after: str | None = None,
        batch: int = 500,
        owner: str | None = None,
        itemize: bool = True,
    ) -> None:
        self._conn, self._key, self._itemize = conn, dlq_key, itemize
        self._upper = str(parse_position(up_to, what="up_to").highest)
        self._up_to = up_to
        self.cursor = str(parse_id(after, allow_bare=False, what="after")) if after else None
        self.last = self.cursor  # the last ID read, or where the run began
        self._batch = _positive(batch, "batch", cap=MAX_BATCH)
        self._owner = owner or _request_owner()
        self._reading = True
        self._hold = False  # draining: send no more rule scripts
        self._ahead: _Ahead | None = None  # the rule script sent, its reply not read yet
        self._leased: _Leased | None = None
        self._added: _Added | None = None
        self._released: list[moves.Release] = []  # released, their records not yet forgotten
        rule = _requeue_rule(dlq_key)
        with translated(conn):
            self._pipelined = rule is not None and is_cluster(conn)
        if self._pipelined and rule is not None:
            keys = [dlq_key, moves.lease_key(dlq_key)]
            if rule[1] and slot_of(rule[1]) == slot_of(dlq_key):
                keys.append(rule[1])  # the target the script writes itself
            self._keys = keys
            self._rule = {moves.sha_of(_source("requeue_rule")): _source("requeue_rule")}
            self._rule_args = [*rule[:5], b"cluster", self._owner.encode(), moves.LEASE_MS,
                               b"all" if itemize else b"count", *rule[5:]]  # fmt: skip

    def __del__(self) -> None:
        # A run left with a rule script in flight (its caller stopped on an error without draining):
        # the reply is never read, so the connection goes, rather than back to the pool half read.
        ahead = getattr(self, "_ahead", None)
        if ahead is not None and ahead.connection is not None:
            with suppress(Exception):  # at the interpreter's exit the pool may be gone already
                ahead.connection.disconnect()
                ahead.pool.release(ahead.connection)

    @property
    def finished(self) -> bool:
        idle = self._leased is None and self._added is None and not self._released
        return (not self._reading or self._hold) and self._ahead is None and idle

    def step(self) -> RequeueBatch:
        """One round trip (see the module docstring). The reply counts what left the DLQ in it; its
        ``cursor`` is :attr:`cursor`, None once the run is :attr:`finished`."""
        if not self._pipelined:
            if not self._reading:
                return _Tally(self._itemize).batch(None, self.last)
            step = requeue_range(self._conn, self._key, up_to=self._up_to, after=self.cursor, batch=self._batch,
                                 owner=self._owner, itemize=self._itemize)  # fmt: skip
            self.last = step.last or self.last
            self.cursor = step.cursor or self.last
            self._reading = step.cursor is not None
            return step
        tally = _Tally(self._itemize)
        with translated(self._conn):
            self._round(tally)
        # Before any batch is settled the run resumes from where it began: the DLQ's start is "0-0".
        return tally.batch(None if self.finished else self.cursor or ZERO_ID, self.last)

    def drain(self) -> RequeueBatch:
        """Finish the batches in flight, reading no more: at most three round trips."""
        tally = _Tally(self._itemize)
        if not self._pipelined:
            return tally.batch(self.cursor, self.last)
        self._hold = True
        try:
            with translated(self._conn):
                while not self.finished:
                    self._round(tally)
        finally:
            self._hold = False
        if self._reading:
            self.cursor = self.last
        return tally.batch(self.cursor, self.last)

    def _round(self, tally: _Tally) -> None:
        client = get_client(self._conn)
        if self._ahead is None and self._reading and not self._hold:
            self._send(client)
        reply = self._collect(client) if self._ahead is not None else None
        if reply is not None:
            # The next batch's rule script goes out at once: the DLQ's node works on it while this
            # client handles the batch just read and the round below.
            scanned = int(reply[0])
            self._reading = scanned == self._batch
            self.last = reply_text(reply[1]) if scanned else self.last
            if self._reading and not self._hold:
                self._send(client)
            self._read(reply, tally)
        added, leased, released = self._added, self._leased, self._released
        commands: list[moves.Command] = []
        if added:
            commands += moves.queue_release(added.release)
        for done in released:
            commands += moves.queue_forget(done)
        add_at = len(commands)
        if leased:
            commands += [moves.queue_add(self._key, item) for item in leased.rule.packs]
        replies = moves.execute(client, commands, scripts=self._rule) if commands else []
        # The release of ``added`` has answered: its entries have left the DLQ.
        self._released = []
        if added:
            self._released.append(added.release)
            for item, moved in added.outcomes:
                if self._itemize:
                    tally.count(item.target, [Requeued(i, item.target, new_id) for i, new_id in moved.added])
                else:
                    tally.count(item.target, len(moved.added))
                tally.failed += [RequeueFailure(i, reason) for i, reason in moved.failed]
            self.cursor = added.last or self.cursor
        self._added = None
        if leased:
            outcomes = [moves.add_outcome(item, reply) for item, reply in
                        zip(leased.rule.packs, replies[add_at:], strict=True)]  # fmt: skip
            release = moves.release_plan(self._key, leased.rule.packs, outcomes,
                                         order=leased.rule.still, at_head=leased.at_head)  # fmt: skip
            pairs = list(zip(leased.rule.packs, outcomes, strict=True))
            self._added = _Added(leased.rule.last, release, pairs, leased.at_head)
        self._leased = None

    def _send(self, client: Any) -> None:
        """Write the rule script of the next batch to the DLQ's node, not waiting for its reply."""
        [(sha, _text)] = self._rule.items()
        start = "(" + self.last if self.last else "-"
        command = ("EVALSHA", sha, len(self._keys), *self._keys, start, self._upper, self._batch, *self._rule_args)
        pool = client.get_redis_connection(client.get_node_from_key(self._key)).connection_pool
        connection = pool.get_connection()
        try:
            connection.send_command(*command)
        except RedisError:  # the node is gone (failover): the cluster's way finds its successor
            connection.disconnect()
            pool.release(connection)
            self._ahead = _Ahead(None, None, command)
            return
        except BaseException:
            connection.disconnect()
            pool.release(connection)
            raise
        self._ahead = _Ahead(pool, connection, command)

    def _collect(self, client: Any) -> Any:
        """The reply of the rule script :meth:`_send` wrote. Should the node not answer it (it lost the
        script or the slot, or the connection broke), it is sent again the cluster's way (loaded, MOVED
        followed), as a pipeline would: the same owner reading the same batch again leases it again."""
        ahead, self._ahead = self._ahead, None
        assert ahead is not None
        if ahead.connection is None:
            return moves.execute(client, [ahead.command], scripts=self._rule)[0]
        try:
            return ahead.connection.read_response()
        except RedisError:
            ahead.connection.disconnect()
            return moves.execute(client, [ahead.command], scripts=self._rule)[0]
        except BaseException:
            ahead.connection.disconnect()  # a reply half read: the connection cannot be used again
            raise
        finally:
            ahead.pool.release(ahead.connection)

    def _read(self, reply: list[Any], tally: _Tally) -> None:
        """The rule script's batch: count what it moved itself, move what it declined, keep what it leased."""
        rule = rule_batch(reply, itemize=self._itemize)
        tally.scanned += rule.scanned
        if not rule.scanned:
            require_stream(self._conn, get_client(self._conn).type(self._key))
        if self._itemize:
            for item in rule.requeued:
                tally.count(item.stream, [item])
        else:
            for stream, n in rule.per_target.items():
                tally.count(stream, n)
        tally.failed += rule.failed
        rest = requeue_declined(self._conn, self._key, rule.declined, owner=self._owner)
        for item in rest.requeued:
            tally.count(item.stream, [item])
        tally.missing += rest.missing
        tally.failed += rest.failed
        # Nothing is older than this batch when the script saw so, or when nothing was older than the
        # batch before it and that one leaves nothing behind: it is released before this one is.
        before = self._added
        chained = before is not None and before.at_head and before.release.clean
        self._leased = _Leased(rule, rule.at_head or chained)
