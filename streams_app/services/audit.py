"""Who may do what, read-only mode, and the one audit row every action attempt leaves.

The other modules of :mod:`streams_app.services` run their Redis calls inside :func:`action_audit`
(or :func:`action_run`); views call :func:`action_input` before them to check the role and validate
the input. :func:`audit_write_system` is for background jobs reporting what they changed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from django import forms
from django.core.exceptions import PermissionDenied

from streams_app.accounts import auth
from streams_app.audit.models import AuditEvent
from streams_app.live import broadcast
from streams_app.redis_ops.decoding import display_text
from streams_app.redis_ops.errors import InvalidArgument, OpsError
from streams_app.views.forms import validated

if TYPE_CHECKING:
    from streams_app.accounts.auth import UserLike

T = TypeVar("T")

#: The least role each action needs (SPEC section 3). An action missing here is refused to everyone,
#: so a new button cannot ship without deciding who may press it.
ACTION_ROLES: dict[str, auth.Role] = {
    "claim": auth.Role.OPERATOR,
    "autoclaim": auth.Role.OPERATOR,
    "ack": auth.Role.OPERATOR,
    "rewind": auth.Role.OPERATOR,
    "rewind.preview": auth.Role.OPERATOR,
    "dlq.requeue": auth.Role.OPERATOR,
    "dlq.requeue_all": auth.Role.OPERATOR,
    "replay": auth.Role.OPERATOR,
    "replay.count": auth.Role.OPERATOR,
    "job.cancel": auth.Role.OPERATOR,
    "job.resume": auth.Role.OPERATOR,
    "pipeline.run": auth.Role.OPERATOR,  # data pipeline (issue 7): start export + Spark rollups
    "dlq.delete": auth.Role.ADMIN,
    "dlq.purge": auth.Role.ADMIN,
    # admin actions: previews too, so a viewer never sees what a deletion would take
    "consumer.delete.preview": auth.Role.ADMIN,
    "consumer.delete": auth.Role.ADMIN,
    "group.delete": auth.Role.ADMIN,
    "stream.trim.preview": auth.Role.ADMIN,
    "stream.trim": auth.Role.ADMIN,
    "stream.delete.preview": auth.Role.ADMIN,
    "stream.delete": auth.Role.ADMIN,
    # personal API tokens page: every user manages their own
    "token.create": auth.Role.VIEWER,
    "token.revoke": auth.Role.VIEWER,
}

#: Actions on the console's own records that read-only mode allows: it protects the monitored Redis,
#: and a read-only console is still read through the API, with personal tokens.
READ_ONLY_ALLOWED: frozenset[str] = frozenset({"token.create", "token.revoke"})

#: IDs kept in one audit row; a bigger selection is recorded by its count (``ids_count``).
AUDIT_MAX_IDS = 1000
_ERROR_CHARS = 2000


# --------------------------------------------------------------------------------------- the audit


@dataclass
class ActionRecord:
    """What one audit row will say; the code inside :func:`action_audit` fills in what it learns."""

    action: str
    conn: str
    stream: bytes | None = None
    group: bytes | None = None
    ids: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    affected: int = 0


def action_authorize(*, user: UserLike | None, action: str) -> None:
    """Raise PermissionDenied unless ``user`` may run ``action`` now.

    Read-only mode is checked first: it refuses everyone, admins included, and its message says so
    rather than talking about roles (except for the console-only actions of :data:`READ_ONLY_ALLOWED`).
    """
    if action not in READ_ONLY_ALLOWED:
        auth.require_writable()
    role = ACTION_ROLES.get(action)
    if role is None:
        raise PermissionDenied(f"{action!r} is not an action the console knows.")
    auth.require_role(user, role)


def _is_preview(action: str) -> bool:
    """Previews and dry-run counts change nothing: no one needs telling."""
    return action.endswith((".preview", ".count"))


@contextmanager
def action_audit(
    *,
    user: UserLike | None,
    conn: str,
    action: str,
    stream: bytes | None = None,
    group: bytes | None = None,
    ids: Sequence[str] = (),
    params: Mapping[str, Any] | None = None,
) -> Iterator[ActionRecord]:
    """Check that ``user`` may run ``action``, run the block, and write one audit row either way.

    A refusal is written as ``denied`` and raised before the block runs; an exception inside the
    block (an invalid argument, Redis refusing or unreachable) is written as ``error`` and raised
    again, so the caller answers exactly as it would have without the audit. The block may fill in
    the record (IDs it resolved, parameters, ``affected``) as it goes.
    """
    record = ActionRecord(
        action=action, conn=conn, stream=stream, group=group, ids=list(ids), params=dict(params or {})
    )
    started = time.monotonic()
    try:
        action_authorize(user=user, action=action)
    except PermissionDenied as exc:
        _audit_write(user=user, record=record, outcome=AuditEvent.Outcome.DENIED, error=str(exc), started=started)
        raise
    try:
        yield record
    except Exception as exc:
        _audit_write(user=user, record=record, outcome=AuditEvent.Outcome.ERROR, error=_describe(exc), started=started)
        raise
    _audit_write(user=user, record=record, outcome=AuditEvent.Outcome.OK, error="", started=started)
    if record.stream is not None and not _is_preview(action):
        # Open pages of the stream (tail, stream, group, DLQ) refresh themselves; never raises.
        broadcast.stream_changed(
            conn, record.stream, action=action, affected=record.affected,
            user=getattr(user, "get_username", lambda: "")(),
        )


def action_input(
    *,
    user: UserLike | None,
    conn: str,
    action: str,
    form: type[forms.Form],
    data: Mapping[str, Any],
    stream: bytes | None = None,
    group: bytes | None = None,
) -> dict[str, Any]:
    """Check the caller may run ``action``, then validate its input with ``form``.

    Views call this before the ``<entity>_<verb>`` function, so a viewer gets a 403 whatever they
    sent, and a refused or malformed request still leaves its one audit row (the action function,
    which writes the row of the attempt itself, is then never reached).
    """
    started = time.monotonic()
    record = ActionRecord(action=action, conn=conn, stream=stream, group=group)
    try:
        action_authorize(user=user, action=action)
    except PermissionDenied as exc:
        _audit_write(user=user, record=record, outcome=AuditEvent.Outcome.DENIED, error=str(exc), started=started)
        raise
    try:
        return validated(form, data)
    except InvalidArgument as exc:
        _audit_write(user=user, record=record, outcome=AuditEvent.Outcome.ERROR, error=exc.message, started=started)
        raise


def action_run(
    *,
    user: UserLike | None,
    conn: str,
    action: str,
    fn: Callable[[], T],
    stream: bytes | None = None,
    group: bytes | None = None,
    ids: Sequence[str] = (),
    params: Mapping[str, Any] | None = None,
    affected: Callable[[T], int] | None = None,
) -> T:
    """Run ``fn`` as ``action`` under the role, read-only and audit rules of :func:`action_audit`.

    ``affected(result)`` says how many entries the call changed, for the audit row.
    """
    with action_audit(
        user=user, conn=conn, action=action, stream=stream, group=group, ids=ids, params=params
    ) as record:
        result = fn()
        if affected is not None:
            record.affected = affected(result)
    return result


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
) -> AuditEvent:
    """An audit row for something the console did on a user's behalf after the request ended.

    Used by background jobs when they finish: the request that started a job is audited with
    ``affected=0`` (nothing had changed yet), this row says what the job changed in the end.
    """
    record = ActionRecord(action=action, conn=conn, stream=stream, params=dict(params or {}), affected=affected)
    return _audit_write(user=user, record=record, outcome=outcome, error=error, duration_ms=duration_ms)


def _audit_write(
    *,
    user: UserLike | None,
    record: ActionRecord,
    outcome: str,
    error: str,
    started: float | None = None,
    duration_ms: int | None = None,
) -> AuditEvent:
    if duration_ms is None:
        duration_ms = round((time.monotonic() - (started or time.monotonic())) * 1000)
    ids = [str(i) for i in record.ids]
    params = _jsonable(record.params)
    if len(ids) > AUDIT_MAX_IDS:
        params["ids_count"] = len(ids)
        ids = ids[:AUDIT_MAX_IDS]
    authenticated = user is not None and user.is_authenticated
    return AuditEvent.objects.create(
        who=user if authenticated else None,
        username=user.get_username() if authenticated else "",
        connection=record.conn,
        action=record.action,
        target_stream=record.stream,
        target_display=display_text(record.stream) if record.stream is not None else "",
        target_group=display_text(record.group) if record.group is not None else "",
        target_ids=ids,
        parameters=params,
        outcome=outcome,
        error=error[:_ERROR_CHARS],
        affected=record.affected,
        duration_ms=duration_ms,
    )


def _describe(exc: Exception) -> str:
    if isinstance(exc, OpsError):
        return exc.message
    return f"{type(exc).__name__}: {exc}"


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
