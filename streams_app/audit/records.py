"""Writing audit rows: the one shape every row has, for actions and for the jobs they start.

:mod:`streams_app.services` decides who may act and writes the row of every attempt through
:func:`audit_write`; a background job, which runs after its request ended and checks no role, reports
what it changed in the end through :func:`audit_write_system`. Both live here, below services and
jobs, so that a job can leave its row without importing the layer that starts it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from eventbus.text import display_text, id_order
from streams_app.accounts.models import OidcIdentity
from streams_app.audit.models import AuditEvent

if TYPE_CHECKING:
    from streams_app.accounts.roles import UserLike

#: IDs kept in one audit row; a bigger selection is recorded by its count (``ids_count``).
AUDIT_MAX_IDS = 1000
_ERROR_CHARS = 2000


@dataclass
class ActionRecord:
    """What one audit row will say; the code inside ``action_audit`` fills in what it learns."""

    action: str
    conn: str
    stream: bytes | None = None
    group: bytes | None = None
    ids: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    affected: int = 0
    #: What the row names as its target when it is not a stream (an alert rule): shown as the stream is.
    target: str = ""


def audit_write(
    *,
    user: UserLike | None,
    record: ActionRecord,
    outcome: str,
    error: str,
    started: float | None = None,
    duration_ms: int | None = None,
    identity: tuple[str, str] | None = None,
) -> AuditEvent:
    """One audit row for ``record``; its duration is ``duration_ms`` or the time since ``started``.

    A user who signs in through an OpenID provider is named by it too: the row carries the provider's
    issuer and the user's subject there (``identity`` when the row is about someone without an account).
    """
    if duration_ms is None:
        duration_ms = round((time.monotonic() - (started or time.monotonic())) * 1000)
    ids = [str(i) for i in record.ids]
    params = _jsonable(record.params)
    if len(ids) > AUDIT_MAX_IDS:
        params["ids_count"] = len(ids)
        # the lowest and highest of them too, so what the row names can still be found by ID (a journey)
        params["ids_range"] = [min(ids, key=_id_order), max(ids, key=_id_order)]
        ids = ids[:AUDIT_MAX_IDS]
    account = user if user is not None and user.is_authenticated else None
    if identity is None and account is not None:
        identity = OidcIdentity.objects.filter(user_id=account.pk).values_list("issuer", "subject").first()
    issuer, subject = identity or ("", "")
    return AuditEvent.objects.create(
        who=account,
        username=account.get_username() if account is not None else "",
        oidc_issuer=issuer,
        oidc_subject=subject,
        connection=record.conn,
        action=record.action,
        target_stream=record.stream,
        target_display=display_text(record.stream) if record.stream is not None else record.target,
        target_group=display_text(record.group) if record.group is not None else "",
        target_ids=ids,
        parameters=params,
        outcome=outcome,
        error=error[:_ERROR_CHARS],
        affected=record.affected,
        duration_ms=duration_ms,
    )


def audit_write_system(
    *,
    user: UserLike | None,
    conn: str,
    action: str,
    stream: bytes | None = None,
    params: Mapping[str, Any] | None = None,
    outcome: str,
    error: str = "",
    affected: int = 0,
    duration_ms: int = 0,
    identity: tuple[str, str] | None = None,
) -> AuditEvent:
    """An audit row for something the console did on a user's behalf after the request ended.

    Used by background jobs when they finish: the request that started a job is audited with
    ``affected=0`` (nothing had changed yet), this row says what the job changed in the end.
    """
    record = ActionRecord(action=action, conn=conn, stream=stream, params=dict(params or {}), affected=affected)
    return audit_write(
        user=user, record=record, outcome=outcome, error=error, duration_ms=duration_ms, identity=identity
    )


def _id_order(entry_id: str) -> tuple[int, int]:
    """An entry ID's place in a stream (text that is no ID sorts first)."""
    try:
        return id_order(entry_id)
    except ValueError:
        return (-1, -1)


def _jsonable(value: Any) -> Any:
    """Parameters as JSON: bytes (keys, field filters) become their display text."""
    if isinstance(value, bytes):
        return display_text(value)
    if isinstance(value, Mapping):
        return {str(_jsonable(k)): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)
