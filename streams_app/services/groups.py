"""Consumer-group actions an operator takes: claim, autoclaim and ack pending entries, rewind a group."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from streams_app.redis_ops import actions
from streams_app.redis_ops.reads import pending as pending_reads
from streams_app.services.audit import action_audit, action_run

if TYPE_CHECKING:
    from streams_app.accounts.roles import UserLike


# ------------------------------------------------------------------------------ pending entries


def pending_claim(
    *,
    user: UserLike | None,
    conn: str,
    key: bytes,
    group: bytes,
    ids: Sequence[str],
    consumer: bytes,
    min_idle_ms: int,
) -> actions.ClaimResult:
    """Give the selected pending entries to ``consumer``, but only those still idle ``min_idle_ms``.

    The idle guard is what makes a claim safe: an entry its consumer touched again meanwhile is
    skipped, not stolen. Entries deleted from the stream are reported as ``deleted``.
    """
    return action_run(
        user=user, conn=conn, action="claim", stream=key, group=group, ids=ids,
        params={"consumer": consumer, "min_idle_ms": min_idle_ms},
        fn=lambda: actions.claim(conn, key, group, ids=list(ids), consumer=consumer, min_idle_ms=min_idle_ms),
        affected=lambda result: len(result.claimed),
    )


def pending_autoclaim(
    *,
    user: UserLike | None,
    conn: str,
    key: bytes,
    group: bytes,
    consumer: bytes,
    min_idle_ms: int,
    count: int,
    limit: int | None = None,
) -> actions.ClaimResult:
    """Sweep: claim entries idle at least ``min_idle_ms`` to ``consumer`` (XAUTOCLAIM), ``count`` per call.

    With ``limit`` the sweep stops once it claimed that many (the page's sweep claims exactly what its
    confirm page counted, :func:`pending_autoclaim_preview`); without, it runs until the PEL is swept.
    """
    params: dict[str, object] = {"consumer": consumer, "min_idle_ms": min_idle_ms, "count": count}
    if limit is not None:
        params["limit"] = limit
    with action_audit(user=user, conn=conn, action="autoclaim", stream=key, group=group, params=params) as record:
        result = actions.autoclaim(conn, key, group, consumer=consumer, min_idle_ms=min_idle_ms, count=count, limit=limit)
        record.affected = len(result.claimed) + len(result.deleted)
        # the IDs it claimed, so an event's journey shows who claimed it and to whom: the row keeps the
        # first AUDIT_MAX_IDS, and the count and range of all (streams_app.audit.records.audit_write)
        record.ids = list(result.claimed)
        if result.deleted:
            record.params["deleted"] = len(result.deleted)
    return result


@dataclass(frozen=True, slots=True)
class SweepPreview:
    """What a sweep limited to ``limit`` entries would do now, read from XPENDING ... IDLE.

    ``will_claim`` idle entries whose message exists, the first ``limit`` in ID order (what
    XAUTOCLAIM takes); ``deleted`` idle pending IDs seen on the way whose message is gone (the sweep
    drops them from the pending list instead of claiming them); ``more``: further idle entries stay
    pending for another sweep; ``complete`` is False when the read stopped at its bound before it
    could tell (``will_claim`` is then a lower bound).
    """

    min_idle_ms: int
    limit: int
    will_claim: tuple[str, ...]
    deleted: tuple[str, ...]
    more: bool
    complete: bool = True


#: XPENDING pages a sweep preview reads at most (only deleted entries can make it read a second one).
SWEEP_PREVIEW_PAGES = 10


def pending_autoclaim_preview(*, conn: str, key: bytes, group: bytes, min_idle_ms: int, limit: int) -> SweepPreview:
    """Count, changing nothing, the entries a sweep limited to ``limit`` would claim now.

    A read, shown on the sweep's confirm page before anything changes (no audit row: nothing is
    done; the sweep itself is audited). Pending entries idle at least ``min_idle_ms`` are read in ID
    order with ``XPENDING ... IDLE``, a page of at most ``limit`` (<= 1000) with each message's
    existence, until ``limit`` existing ones are found: XAUTOCLAIM does not count deleted ones.
    """
    will_claim: list[str] = []
    deleted: list[str] = []
    after: str | None = None
    for _ in range(SWEEP_PREVIEW_PAGES):
        page = pending_reads.pending_page(
            conn, key, group, min_idle_ms=min_idle_ms, after=after, count=limit - len(will_claim)
        )
        for entry in page.entries:
            if not entry.exists:
                deleted.append(entry.id)
            elif len(will_claim) < limit:
                will_claim.append(entry.id)
        if page.next is None:
            return SweepPreview(min_idle_ms, limit, tuple(will_claim), tuple(deleted), more=False)
        if len(will_claim) >= limit:
            return SweepPreview(min_idle_ms, limit, tuple(will_claim), tuple(deleted), more=True)
        after = page.next
    return SweepPreview(min_idle_ms, limit, tuple(will_claim), tuple(deleted), more=True, complete=False)


def pending_ack(*, user: UserLike | None, conn: str, key: bytes, group: bytes, ids: Sequence[str]) -> int:
    """Acknowledge entries without processing them (skip a poison message, clear deleted ones)."""
    return action_run(
        user=user, conn=conn, action="ack", stream=key, group=group, ids=ids,
        fn=lambda: actions.ack(conn, key, group, ids=list(ids)),
        affected=lambda acked: acked,
    )


# ------------------------------------------------------------------------------------- rewind


def group_rewind_preview(
    *, user: UserLike | None, conn: str, key: bytes, group: bytes, to: str
) -> actions.RewindPlan:
    """What rewinding to ``to`` would do, changing nothing: shown before the operator confirms."""
    return action_run(
        user=user, conn=conn, action="rewind.preview", stream=key, group=group, params={"to": to},
        fn=lambda: actions.rewind_preview(conn, key, group, to=to),
    )


def group_rewind(*, user: UserLike | None, conn: str, key: bytes, group: bytes, to: str) -> actions.RewindPlan:
    """Move the group's last-delivered ID to ``to`` (an ID or a time), keeping its lag known."""
    with action_audit(user=user, conn=conn, action="rewind", stream=key, group=group, params={"to": to}) as record:
        plan = actions.rewind(conn, key, group, to=to)
        record.params.update(
            previous_last_delivered_id=plan.current_last_delivered_id,
            last_delivered_id=plan.last_delivered_id,
            entries_read=plan.entries_read,
            will_redeliver=plan.will_redeliver,
        )
    return plan
