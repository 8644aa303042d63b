"""Adding an entry to a stream by hand: operators, audited, never in read-only mode."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from streams_app.redis_ops.actions import entries as entry_actions
from streams_app.services.audit import action_audit

if TYPE_CHECKING:
    from streams_app.accounts.roles import UserLike


def entry_add_action(*, trims: bool) -> str:
    """The action an add is audited and authorised as: with a MAXLEN (``trims``) it also trims the
    stream, which is an admin's call everywhere else (``stream.trim``), so it needs the admin role too."""
    return "entry.add.trim" if trims else "entry.add"


def entry_add(
    *,
    user: UserLike | None,
    conn: str,
    key: bytes,
    fields: Sequence[tuple[bytes, bytes]],
    maxlen: int | None = None,
) -> str:
    """XADD one entry with ``fields`` to the existing stream ``key``; its new ID, also on the audit row.

    The row records how many fields and bytes were written, not the values: a payload may hold what
    the audit log's readers should not see, and the entry itself says what it holds.
    """
    params: dict[str, object] = {
        "fields": len(fields),
        "bytes": sum(len(name) + len(value) for name, value in fields),
    }
    if maxlen is not None:
        params["maxlen"] = maxlen
    with action_audit(
        user=user, conn=conn, action=entry_add_action(trims=maxlen is not None), stream=key, params=params
    ) as record:
        new_id = entry_actions.entry_add(conn, key, fields, maxlen=maxlen)
        record.ids = [new_id]
        record.affected = 1
    return new_id
