"""Admin actions: delete a consumer or a group, trim a stream, delete entries; each with a preview."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from eventbus.text import display_text
from streams_app.redis_ops import actions
from streams_app.redis_ops.errors import InvalidArgument
from streams_app.services.audit import action_audit, action_run

if TYPE_CHECKING:
    from streams_app.accounts.roles import UserLike


def consumer_delete_preview(
    *, user: UserLike | None, conn: str, key: bytes, group: bytes, consumer: bytes
) -> actions.ConsumerPlan:
    """The consumer's pending count, shown before the admin confirms deleting it."""
    return action_run(
        user=user, conn=conn, action="consumer.delete.preview", stream=key, group=group,
        params={"consumer": consumer},
        fn=lambda: actions.consumer_delete_preview(conn, key, group, consumer=consumer),
    )


def consumer_delete(
    *, user: UserLike | None, conn: str, key: bytes, group: bytes, consumer: bytes, force: bool = False
) -> actions.ConsumerDeleted:
    """Delete a consumer of a group (admin); refused while it owns pending entries unless ``force``.

    Its pending entries would leave the PEL for good (nobody is told about them again), so the safe
    order is: claim them to another consumer, then delete. ``force`` drops them, and the audit row
    says how many (``affected``).
    """
    params = {"consumer": consumer, "force": force}
    with action_audit(user=user, conn=conn, action="consumer.delete", stream=key, group=group, params=params) as record:
        result = actions.consumer_delete(conn, key, group, consumer=consumer, force=force)
        record.affected = result.pending_dropped
        record.params["pending_dropped"] = result.pending_dropped
    return result


def group_delete(
    *, user: UserLike | None, conn: str, key: bytes, group: bytes, confirm: str
) -> actions.GroupDestroyed:
    """Delete a consumer group (admin), once its name was typed to confirm; the stream stays.

    The typed name is checked here, not in the form, so the API cannot delete by accident either.
    """
    with action_audit(user=user, conn=conn, action="group.delete", stream=key, group=group) as record:
        if confirm != display_text(group):
            raise InvalidArgument("To delete the group, type its name exactly as shown.", conn=conn)
        result = actions.group_destroy(conn, key, group)
        record.affected = result.pending_dropped
        record.params.update(
            consumers=result.consumers, pending_dropped=result.pending_dropped,
            last_delivered_id=result.last_delivered_id,
        )
    return result


def stream_trim_preview(
    *, user: UserLike | None, conn: str, key: bytes, maxlen: int | None = None, minid: str | None = None
) -> actions.TrimPlan:
    """How many entries a trim removes ("about" for MAXLEN ~) and which groups have pending ones there."""
    params = {"maxlen": maxlen} if maxlen is not None else {"minid": minid}
    with action_audit(user=user, conn=conn, action="stream.trim.preview", stream=key, params=params) as record:
        plan = actions.trim_preview(conn, key, maxlen=maxlen, minid=minid)
        if plan.minid:
            record.params["minid"] = plan.minid  # a time, resolved to the exact ID the trim will use
        record.params.update(will_remove=plan.will_remove, approximate=plan.approximate)
    return plan


def stream_trim(
    *, user: UserLike | None, conn: str, key: bytes, maxlen: int | None = None, minid: str | None = None
) -> actions.TrimResult:
    """Trim the stream (admin): keep about the newest ``maxlen`` entries, or drop those older than ``minid``."""
    params = {"maxlen": maxlen} if maxlen is not None else {"minid": minid}
    with action_audit(user=user, conn=conn, action="stream.trim", stream=key, params=params) as record:
        result = actions.trim(conn, key, maxlen=maxlen, minid=minid)
        record.affected = result.removed
        record.params.update(strategy=result.strategy, length_after=result.length)
        if result.minid:
            record.params["minid"] = result.minid
    return result


def stream_entries_delete_preview(
    *, user: UserLike | None, conn: str, key: bytes, ids: Sequence[str]
) -> actions.EntriesPlan:
    """Which of the IDs exist and which are pending in some group, before the admin confirms."""
    return action_run(
        user=user, conn=conn, action="stream.delete.preview", stream=key, ids=ids,
        fn=lambda: actions.entries_delete_preview(conn, key, ids=list(ids)),
    )


def stream_entries_delete(
    *, user: UserLike | None, conn: str, key: bytes, ids: Sequence[str]
) -> actions.EntriesDeleted:
    """XDEL entries (admin). Deleted entries still pending in a group stay there until acked."""
    with action_audit(user=user, conn=conn, action="stream.delete", stream=key, ids=ids) as record:
        result = actions.entries_delete(conn, key, ids=list(ids))
        record.affected = len(result.deleted)
        record.params.update(
            missing=list(result.missing),
            still_pending={display_text(p.group): list(p.ids) for p in result.pending},
        )
    return result
