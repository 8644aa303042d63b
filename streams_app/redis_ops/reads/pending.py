"""Pending entries: a page of a group's PEL with each message's existence (and, for previews, the
message itself), the longest idle time, and which groups hold one entry.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..client import get_client
from ..commands import keyed_pipeline, lookup, pipelined
from ..errors import InvalidArgument, Unreachable, translated
from ..ids import parse_id
from ..parsers import parse_entry, parse_pending_entry, parse_pending_summary
from ..pending_idle import first_probe, longest_idle
from ..types import (
    Entry,
    EntryMask,
    PendingEntry,
    PendingIdle,
    PendingSummary,
    masked,
)
from .limits import DEFAULT_PAGE, check_count, validate_key


@dataclass(frozen=True, slots=True)
class PendingPage:
    summary: PendingSummary
    entries: tuple[PendingEntry, ...]
    next: str | None


def pending_longest_idle(conn: str, key: bytes, group: bytes, *, pending: int) -> PendingIdle | None:
    """The longest idle time among the group's ``pending`` entries and its entry (None: nothing pending).

    Bounded as :mod:`..pending_idle` says: one ``XPENDING - + K`` and, only for a PEL longer than K (and
    not longer than the walk limit), up to a few ``XPENDING ... IDLE`` rounds; ``exact=False`` when the
    figure is a lower bound.
    """
    sent_at = time.monotonic()
    with translated(conn):
        reply = get_client(conn).execute_command(*first_probe(key, group))  # type: ignore[no-untyped-call]  # redis-py leaves execute_command unannotated
    figures, _, _ = longest_idle(conn, [(key, group, pending, reply)], sent_at=sent_at)
    return figures[0]


def pending_page(
    conn: str,
    key: bytes,
    group: bytes,
    *,
    consumer: bytes | None = None,
    min_idle_ms: int | None = None,
    after: str | None = None,
    count: int = DEFAULT_PAGE,
) -> PendingPage:
    """XPENDING's summary and one page of its extended form, each entry marked if it still exists.

    Pending entries whose message was XDELed (or trimmed away) stay in the PEL until acked or
    claimed; they are marked ``exists=False`` so an operator can ack them away.
    """
    page, _ = _pending_read(conn, key, group, consumer=consumer, min_idle_ms=min_idle_ms, after=after, count=count)
    return page


def pending_page_messages(
    conn: str,
    key: bytes,
    group: bytes,
    *,
    consumer: bytes | None = None,
    min_idle_ms: int | None = None,
    after: str | None = None,
    count: int = DEFAULT_PAGE,
    mask: EntryMask | None,
) -> tuple[PendingPage, tuple[Entry | None, ...]]:
    """:func:`pending_page` and each row's message as ``mask`` shows it (None: no longer in the stream),
    for the rows' payload previews.

    The messages are the replies of the existence check's ``XRANGE id id`` (one per row, in the same
    pipeline): a preview costs no command beyond what telling a deleted message apart already costs.
    """
    page, replies = _pending_read(
        conn, key, group, consumer=consumer, min_idle_ms=min_idle_ms, after=after, count=count
    )
    messages = tuple(masked(mask, [parse_entry(raw[0])])[0] if raw else None for raw in replies)
    return page, messages


def _pending_read(
    conn: str,
    key: bytes,
    group: bytes,
    *,
    consumer: bytes | None,
    min_idle_ms: int | None,
    after: str | None,
    count: int,
) -> tuple[PendingPage, list[Any]]:
    """The page and the raw ``XRANGE id id`` reply of each of its rows (empty: the message is gone)."""
    validate_key(key)
    count = check_count(count)
    if min_idle_ms is not None and min_idle_ms < 0:
        raise InvalidArgument("min_idle_ms must not be negative.")
    start = "(" + str(parse_id(after, what="after")) if after else "-"
    args: list[object] = ["XPENDING", key, group]
    if min_idle_ms:
        args += ["IDLE", min_idle_ms]
    args += [start, "+", count + 1]
    if consumer:
        args.append(consumer)
    client = get_client(conn)
    with translated(conn):
        pipe = client.pipeline(transaction=False)
        pipe.execute_command("XPENDING", key, group)
        pipe.execute_command(*args)
        summary_raw, rows = pipe.execute()
        more = len(rows) > count
        rows = rows[:count]
        found = pipelined(client, [lookup(key, row[0]) for row in rows]) if rows else []
    entries = tuple(parse_pending_entry(row, exists=bool(hit)) for row, hit in zip(rows, found, strict=True))
    page = PendingPage(
        summary=parse_pending_summary(summary_raw), entries=entries, next=entries[-1].id if more else None
    )
    return page, list(found)


@dataclass(frozen=True, slots=True)
class EntryPending:
    """One group holding an entry in its pending list: who has it, how long idle, how often delivered."""

    group: bytes
    consumer: bytes
    idle_ms: int
    deliveries: int


def entry_pending(conn: str, key: bytes, entry_id: str, groups: Sequence[bytes]) -> tuple[EntryPending, ...]:
    """The groups among ``groups`` whose pending list holds ``entry_id``, in the order given.

    ``XPENDING key group id id 1`` per group, all in one pipelined round trip to the key's node
    (:func:`keyed_pipeline`: every command touches ``key`` only). A group deleted since the caller
    listed it answers NOGROUP and is left out; a node that does not answer is :class:`Unreachable`.
    """
    validate_key(key)
    sid = str(parse_id(entry_id, allow_bare=False, what="entry ID"))
    if not groups:
        return ()
    read = keyed_pipeline(conn, [key], lambda k: [("XPENDING", k, group, sid, sid, 1) for group in groups])
    replies = read.replies[0]
    if replies is None:
        raise Unreachable(f"The node holding this stream did not answer: {', '.join(read.missed)}.", conn=conn)
    out: list[EntryPending] = []
    for group, reply in zip(groups, replies, strict=True):
        if isinstance(reply, Exception):
            if "NOGROUP" in str(reply):
                continue
            with translated(conn):
                raise reply
        if reply:
            row = parse_pending_entry(reply[0])
            out.append(EntryPending(group=group, consumer=row.consumer, idle_ms=row.idle_ms,
                                    deliveries=row.deliveries))
    return tuple(out)
