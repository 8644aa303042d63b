"""Consumer-group actions an operator takes: claim, autoclaim and ack pending entries, rewind a group."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from streams_app.redis_ops import actions
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
) -> actions.ClaimResult:
    """Sweep: claim up to ``count`` entries idle at least ``min_idle_ms`` to ``consumer`` (XAUTOCLAIM)."""
    return action_run(
        user=user, conn=conn, action="autoclaim", stream=key, group=group,
        params={"consumer": consumer, "min_idle_ms": min_idle_ms, "count": count},
        fn=lambda: actions.autoclaim(conn, key, group, consumer=consumer, min_idle_ms=min_idle_ms, count=count),
        affected=lambda result: len(result.claimed) + len(result.deleted),
    )


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
