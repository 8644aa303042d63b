"""Rewind: move a consumer group's last-delivered ID, with a preview of what that redelivers.

The entries to redeliver are counted inside Redis in bounded batches, and the rewind sets ENTRIESREAD
so Redis keeps reporting the group's lag (docs/architecture.md#lag-redis-cannot-tell). :func:`rewind_preview` changes nothing;
:func:`rewind` applies the same plan with ``XGROUP SETID``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eventbus.connection import SyncClient

from ..client import get_client
from ..errors import InvalidArgument, NotFound, translated
from ..ids import parse_position
from ..parsers import reply_text
from ._common import ZERO_ID, _count, _key, _name, _sid, _stream_snapshot


@dataclass(frozen=True, slots=True)
class RewindPlan:
    """Where a rewind puts a group and what it costs, as computed before (or when) doing it.

    ``will_redeliver`` is the number of entries now in the stream after ``last_delivered_id`` (up to
    the last ID at the time of the preview): exactly what XREADGROUP ``>`` then delivers, plus
    whatever is published meanwhile. ``entries_read`` is the ENTRIESREAD given to Redis (None before
    Redis 7). ``lag_known`` is False when entries after the target were deleted (XDEL): Redis then
    reports the group's lag as null until the group has read past them, whatever ENTRIESREAD says.
    """

    last_delivered_id: str
    entries_read: int | None
    will_redeliver: int
    current_last_delivered_id: str
    lag_known: bool = True


# ---------------------------------------------------------------- rewind


def rewind_preview(conn: str, key: bytes, group: bytes, *, to: str) -> RewindPlan:
    """What :func:`rewind` would do, changing nothing.

    ``to`` is where the group's last-delivered ID goes:

    * an entry ID ``ms-seq``: that ID, as ``XGROUP SETID`` takes it (entries after it are delivered);
    * a bare millisecond or an ISO-8601 time: redelivery starts *at* that time, so the last-delivered
      ID becomes the newest entry before it (or 0-0);
    * ``0`` or ``-``: the beginning; ``$``: the end (nothing is redelivered).

    Cost: the number of entries after the target is counted inside Redis (``lua/count_range.lua``) in
    batches of 2,000, so a preview is O(entries to redeliver) but never blocks Redis for more than one
    batch and moves two integers per batch. A target before the first entry costs nothing (the answer
    is the stream length), and so does a target at or after the end.
    """
    return _rewind(conn, key, group, to=to, apply=False)


def rewind(conn: str, key: bytes, group: bytes, *, to: str) -> RewindPlan:
    """Move the group's last-delivered ID (``XGROUP SETID ... ENTRIESREAD n``) and report the plan.

    ENTRIESREAD is the number of entries ever added minus those now after the target, i.e. Redis 7's
    own logical read counter of the target when no entry after it was deleted; XINFO GROUPS ``lag`` is
    then exactly ``will_redeliver``. When entries after the target were deleted (``lag_known`` False),
    Redis ignores the counter and reports null lag until the group reads past them, then recomputes it.
    On Redis 6.2 (no counters) ENTRIESREAD is left out. Pending entries are not touched.

    Entries published after the preview's snapshot are delivered too but not in ``will_redeliver``;
    a trim or delete racing with the count can make Redis's lag differ from it by what was removed.
    """
    return _rewind(conn, key, group, to=to, apply=True)


def _rewind(conn: str, key: bytes, group: bytes, *, to: str, apply: bool) -> RewindPlan:
    _key(key)
    _name(group, "group")
    text = (to or "").strip() if isinstance(to, str) else ""
    if not text:
        raise InvalidArgument("Say where to rewind to: an entry ID, a date-time, 0 (start) or $ (end).")
    client = get_client(conn)
    with translated(conn):
        # One snapshot of the stream's counters and the group, consistent with each other.
        info = _stream_snapshot(conn, client, key)
        group_row = next((g for g in info.groups if g.name == group), None)
        if group_row is None:
            raise NotFound("No such consumer group on this stream.", conn=conn)
        length = info.length
        last = info.last_generated_id or ZERO_ID
        first = info.first_id
        added = info.entries_added
        max_deleted = info.max_deleted_entry_id or ZERO_ID

        target = _rewind_target(client, key, text, last=last)
        if _sid(target) > _sid(last):
            raise InvalidArgument(f"{target} is after the stream's last ID ({last}): use $ for the end.")
        if first is None or _sid(target) >= _sid(last):
            will = 0
        elif _sid(target) < _sid(first):
            will = length
        else:
            will = _count(client, key, "(" + target, last)
        entries_read = added - will if added is not None else None
        # Redis's own test (streamRangeHasTombstones): a deletion at or after the target, and not
        # before the first entry, makes it ignore the group's counter.
        tombstones_ahead = (
            first is not None
            and max_deleted != ZERO_ID
            and _sid(first) <= _sid(max_deleted)
            and _sid(target) <= _sid(max_deleted)
        )
        lag_known = added is not None and not tombstones_ahead
        if apply:
            args: list[Any] = ["XGROUP", "SETID", key, group, target]
            if entries_read is not None:
                args += ["ENTRIESREAD", entries_read]
            client.execute_command(*args)  # type: ignore[no-untyped-call]  # redis-py leaves execute_command unannotated
    return RewindPlan(
        last_delivered_id=target,
        entries_read=entries_read,
        will_redeliver=will,
        current_last_delivered_id=group_row.last_delivered_id,
        lag_known=lag_known,
    )


def _rewind_target(client: SyncClient, key: bytes, text: str, *, last: str) -> str:
    if text == "$":
        return last
    if text in ("0", "-"):
        return ZERO_ID
    pos = parse_position(text, what="rewind target")
    if pos.seq is not None:
        return str(pos.lowest)
    before = (
        client.execute_command("XREVRANGE", key, "(" + str(pos.lowest), "-", "COUNT", 1) if pos.ms else []  # type: ignore[no-untyped-call]  # redis-py leaves execute_command unannotated
    )
    return reply_text(before[0][0]) if before else ZERO_ID
