"""Search results feeding a bulk action on the group page: "ack the pending entries matching this".

The group's pending list is read a page at a time with each row's message (XPENDING, then the
existence check's ``XRANGE id id`` replies kept as the messages:
:func:`~streams_app.redis_ops.reads.pending.pending_page_messages`), and the query is evaluated on each message as
the user sees it (:func:`~streams_app.masking.apply.search_mask`). A pending entry whose message was
deleted has no payload and never matches. The preview counts, up to the highest pending ID now; the
action scans again up to that ID and acks each page's matches at once (the ack action, batched), under
one audit row (action ``ack``, the query in its parameters). Both stop after :data:`MAX_SCAN` pending
entries, or :data:`BUDGET_MS` of scanning (checked after every entry, as the search does: one entry's
evaluation is bounded by the query's cost bound, a run of them is not), and say so. Both say how many
entries they left out because their own data made the query too costly to evaluate
(:attr:`eventbus.search.query.Query.too_costly`): those are not acknowledged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eventbus.search.query import Query
from streams_app import search
from streams_app.masking.apply import search_mask
from streams_app.redis_ops import actions
from streams_app.redis_ops.ids import parse_id
from streams_app.redis_ops.reads import pending as pending_reads
from streams_app.services.audit import action_audit

if TYPE_CHECKING:
    from streams_app.accounts.roles import UserLike

PAGE = 500
MAX_SCAN = 100_000
BUDGET_MS = 2000


@dataclass(frozen=True, slots=True)
class AckMatchingResult:
    """``matched`` of the ``scanned`` pending entries up to ``up_to`` match (``acked`` of them were
    acknowledged, by the action); ``complete`` is False when the scan stopped at :data:`MAX_SCAN`.
    ``too_costly`` of the scanned entries were left out because their own data made the query too
    costly to evaluate: not matched, so never acknowledged (they stay pending)."""

    query: str
    up_to: str | None
    scanned: int
    matched: int
    acked: int
    complete: bool
    too_costly: int = 0


def _matching_pages(
    conn: str, key: bytes, group: bytes, query: Query, *, up_to: str, mask: Callable[..., Any] | None
) -> Iterator[tuple[int, list[str], bool]]:
    """Per page of the pending list up to ``up_to``: (entries scanned, the matching IDs, last page?)."""
    limit = parse_id(up_to)
    deadline = time.monotonic() + BUDGET_MS / 1000
    after: str | None = None
    scanned = 0
    while True:
        page, messages = pending_reads.pending_page_messages(
            conn, key, group, after=after, count=min(PAGE, MAX_SCAN - scanned), mask=mask
        )
        rows = [(p, entry) for p, entry in zip(page.entries, messages, strict=True) if parse_id(p.id) <= limit]
        ids: list[str] = []
        examined = 0
        for _row, entry in rows:
            examined += 1
            if entry is not None and query.matches(entry, key=key):
                ids.append(entry.id)
            if time.monotonic() >= deadline:
                break
        scanned += examined
        # the list's end, or past ``up_to``, with every row of the page examined
        last = (page.next is None or len(rows) < len(page.entries)) and examined == len(rows)
        yield examined, ids, last
        if last or scanned >= MAX_SCAN or time.monotonic() >= deadline:
            return
        after = page.next


def _scan(
    conn: str, key: bytes, group: bytes, query: Query, *, up_to: str, mask: Callable[..., Any] | None,
    each: Callable[[list[str]], int] | None = None,
) -> tuple[int, int, int, bool]:  # fmt: skip
    scanned = matched = acked = 0
    complete = False
    for count, ids, last in _matching_pages(conn, key, group, query, up_to=up_to, mask=mask):
        scanned += count
        matched += len(ids)
        if ids and each is not None:
            acked += each(ids)
        complete = last
    return scanned, matched, acked, complete


def pending_ack_matching_preview(
    *, user: UserLike | None, conn: str, key: bytes, group: bytes, query: str
) -> AckMatchingResult:
    """Count the group's pending entries, up to the highest pending ID now, whose message matches
    ``query`` as ``user`` sees it (a read: no audit row)."""
    compiled = search.compile_query(query)
    summary = pending_reads.pending_page(conn, key, group, count=1).summary
    if not summary.count or summary.max_id is None:
        return AckMatchingResult(query=query, up_to=None, scanned=0, matched=0, acked=0, complete=True)
    up_to = summary.max_id
    scanned, matched, _, complete = _scan(
        conn, key, group, compiled, up_to=up_to, mask=search_mask(user, conn, key)
    )
    return AckMatchingResult(
        query=query, up_to=up_to, scanned=scanned, matched=matched, acked=0, complete=complete,
        too_costly=compiled.too_costly,
    )  # fmt: skip


def pending_ack_matching(
    *, user: UserLike | None, conn: str, key: bytes, group: bytes, query: str, up_to: str
) -> AckMatchingResult:
    """Ack the group's pending entries up to ``up_to`` whose message matches ``query`` as ``user``
    sees it: one XACK per page of matches, one audit row (``ack``, with the query)."""
    params = {"query": query, "up_to": up_to}
    with action_audit(user=user, conn=conn, action="ack", stream=key, group=group, params=params) as record:
        compiled = search.compile_query(query)
        up_to = str(parse_id(up_to, allow_bare=False, what="up_to"))
        seen: list[str] = []

        def ack(ids: list[str]) -> int:
            seen.extend((ids[0], ids[-1]))
            return actions.ack(conn, key, group, ids=ids)

        scanned, matched, acked, complete = _scan(
            conn, key, group, compiled, up_to=up_to, mask=search_mask(user, conn, key), each=ack,
        )  # fmt: skip
        record.affected = acked
        if seen:  # pages come in ID order: the first and the last acked bound the range (a journey finds it)
            record.params["acked_range"] = [seen[0], seen[-1]]
        record.params.update(
            scanned=scanned, matched=matched, complete=complete, too_costly=compiled.too_costly
        )
    return AckMatchingResult(
        query=query, up_to=up_to, scanned=scanned, matched=matched, acked=acked, complete=complete,
        too_costly=compiled.too_costly,
    )  # fmt: skip
