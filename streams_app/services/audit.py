"""Who may do what, read-only mode, and the one audit row every action attempt leaves: the gate.

Every mutation, reveal and change of the console's settings passes here, and nothing else writes the
row of an attempt (``tests/security/test_audit_gate.py`` checks it). The other modules of
:mod:`streams_app.services` run their calls inside :func:`action_audit` (or :func:`action_run`); views
call :func:`action_input` before them to check the role and validate the input, and
:func:`action_check` where a refusal is all there is to write (a form that is not shown). An action
whose row comes after the request's checks (a streamed export, a reveal) holds an
:class:`ActionAttempt` from :func:`action_attempt` until it knows. The rows themselves are written by
:mod:`streams_app.audit.records`, which background jobs use too (``audit_write_system``) to report
what they changed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from django.core.exceptions import PermissionDenied

from streams_app.accounts.roles import Role, require_role, require_writable
from streams_app.audit.models import AuditEvent
from streams_app.audit.records import ActionRecord, audit_write
from streams_app.jobs.runner import JobLimitReached
from streams_app.live import broadcast
from streams_app.redis_ops.errors import InvalidArgument, OpsError

if TYPE_CHECKING:
    from streams_app.accounts.roles import UserLike

T = TypeVar("T")

#: The least role each action needs (docs/api.md#roles-and-the-audit-trail). An action missing here is refused to everyone,
#: so a new button cannot ship without deciding who may press it.
ACTION_ROLES: dict[str, Role] = {
    "claim": Role.OPERATOR,
    "autoclaim": Role.OPERATOR,
    "ack": Role.OPERATOR,
    "rewind": Role.OPERATOR,
    "rewind.preview": Role.OPERATOR,
    "dlq.requeue": Role.OPERATOR,
    "dlq.requeue_all": Role.OPERATOR,
    "dlq.requeue_matching": Role.OPERATOR,  # the dead letters a search matches, by a job
    "dlq.requeue_filtered": Role.OPERATOR,  # a triage count's dead letters (signature, group, origin), by a job
    "replay": Role.OPERATOR,
    "replay.count": Role.OPERATOR,
    "job.cancel": Role.VIEWER,  # one's own job: anyone stops what they started
    "job.cancel.any": Role.OPERATOR,  # someone else's (services/job_control.py picks the action)
    "job.resume": Role.OPERATOR,
    "pipeline.run": Role.OPERATOR,  # starts the export, the Spark rollups and their load
    "entry.add": Role.OPERATOR,  # one entry written by hand (the "Add entry" form, POST .../entries/)
    "entry.add.trim": Role.ADMIN,  # the same with MAXLEN: it trims the stream, as stream.trim does
    "dlq.delete": Role.ADMIN,
    "dlq.purge": Role.ADMIN,
    # the event bus's delayed retries (retries page); .count: what "all" would take, shown first
    "retry.now": Role.OPERATOR,
    "retry.now.count": Role.OPERATOR,
    "retry.dead_letter": Role.OPERATOR,
    "retry.dead_letter.count": Role.OPERATOR,
    "retry.delete": Role.ADMIN,
    "retry.delete.count": Role.ADMIN,
    # admin actions: previews too, so a viewer never sees what a deletion would take
    "consumer.delete.preview": Role.ADMIN,
    "consumer.delete": Role.ADMIN,
    "group.delete": Role.ADMIN,
    "stream.trim.preview": Role.ADMIN,
    "stream.trim": Role.ADMIN,
    "stream.delete.preview": Role.ADMIN,
    "stream.delete": Role.ADMIN,
    # personal API tokens page: every user manages their own
    "token.create": Role.VIEWER,
    "token.revoke": Role.VIEWER,
    "token.revoke.any": Role.ADMIN,  # someone else's, in the Django admin
    # alert rules are the console's own settings: admins manage them
    "alert_rule.create": Role.ADMIN,
    "alert_rule.update": Role.ADMIN,
    "alert_rule.delete": Role.ADMIN,
    # exports: a read, so a viewer's floor; BUSCONSOLE_EXPORT_ROLE may raise it or
    # switch exports off (checked on top of this table in services/exports.py)
    "export": Role.VIEWER,
    "export.job": Role.VIEWER,
    # saved views: anyone keeps private ones; sharing with everyone is an operator's call
    "view.save": Role.VIEWER,
    "view.share": Role.OPERATOR,
    "view.rename": Role.VIEWER,  # the owner only (checked in services/saved_views.py)
    "view.delete": Role.VIEWER,  # the owner, or an admin for a shared view
    # annotations (a deploy marker, an incident note) show on everyone's charts: operators write them
    "annotation.create": Role.OPERATOR,
    # one response showing masked payload values unmasked (?unmasked=1): a read, so a viewer's floor;
    # BUSCONSOLE_UNMASKED_ROLES names the roles that may (checked on top of this table in services/reveal.py)
    "payload.reveal": Role.VIEWER,
    # masking rules, changed in the Django admin (which lets only admins in): what everyone sees of payloads
    "mask_rule.add": Role.ADMIN,
    "mask_rule.change": Role.ADMIN,
    "mask_rule.delete": Role.ADMIN,
    # accounts and role groups, changed in the Django admin: who may do what
    "user.add": Role.ADMIN,
    "user.change": Role.ADMIN,
    "user.password": Role.ADMIN,
    "user.delete": Role.ADMIN,
    "user_group.add": Role.ADMIN,  # the account groups (viewer, operator, admin), not a consumer group
    "user_group.change": Role.ADMIN,
    "user_group.delete": Role.ADMIN,
}

#: Actions on the console's own records that read-only mode allows: it protects the monitored Redis,
#: and a read-only console is still read through the API, with personal tokens.
READ_ONLY_ALLOWED: frozenset[str] = frozenset({"token.create", "token.revoke", "token.revoke.any"})
#: An export only reads the monitored Redis (its job writes a file of the console's own).
READ_ONLY_ALLOWED |= {"export", "export.job"}
#: Stopping a job changes no monitored Redis (what it did stays done), and a read-only console still runs
#: exports, which their owners must be able to stop.
READ_ONLY_ALLOWED |= {"job.cancel", "job.cancel.any"}
#: Saved views are bookmarks in the console's own database: read-only mode leaves them alone too.
READ_ONLY_ALLOWED |= {"view.save", "view.share", "view.rename", "view.delete"}
#: Annotations are notes in the console's own database: an incident on a read-only console gets its notes.
READ_ONLY_ALLOWED |= {"annotation.create"}
#: A reveal only reads the monitored Redis; masking rules are settings in the console's own database,
#: which read-only mode has never stopped an admin from changing.
READ_ONLY_ALLOWED |= {"payload.reveal", "mask_rule.add", "mask_rule.change", "mask_rule.delete"}
#: Accounts and role groups are the console's own records too: read-only mode never locks an admin out.
READ_ONLY_ALLOWED |= {"user.add", "user.change", "user.password", "user.delete", "user_group.add",
                      "user_group.change", "user_group.delete"}



# --------------------------------------------------------------------------------------- the audit


def action_authorize(*, user: UserLike | None, action: str) -> None:
    """Raise PermissionDenied unless ``user`` may run ``action`` now.

    Read-only mode is checked first: it refuses everyone, admins included, and its message says so
    rather than talking about roles (except for the console-only actions of :data:`READ_ONLY_ALLOWED`).
    """
    if action not in READ_ONLY_ALLOWED:
        require_writable()
    action_role_require(user=user, action=action)


def action_role_require(*, user: UserLike | None, action: str) -> None:
    """Raise PermissionDenied unless ``user`` holds the role of ``action``, read-only mode aside: for
    showing a form (which changes nothing, so is not audited) whose save is then refused with the reason."""
    role = ACTION_ROLES.get(action)
    if role is None:
        raise PermissionDenied(f"{action!r} is not an action the console knows.")
    require_role(user, role)


class ActionAttempt:
    """One attempt at an action, authorised when it was opened (:func:`action_attempt`), and the one
    audit row that ends it: written by :meth:`ok`, :meth:`failed`, :meth:`refused` or :meth:`error`,
    once. Its ``record`` is filled in as the action learns (IDs it resolved, ``affected``).

    Most actions use :func:`action_audit`, which opens and ends an attempt around one block. This is for
    an action whose row comes later than the request's checks: a streamed export writes it once its last
    byte is out, a reveal once the response knows which values it showed unmasked.
    """

    def __init__(self, *, user: UserLike | None, record: ActionRecord, started: float) -> None:
        self.user = user
        self.record = record
        self.started = started
        self.ended = False

    def _end(self, outcome: str, error: str) -> None:
        if self.ended:
            raise RuntimeError(f"the attempt at {self.record.action!r} already has its audit row")
        self.ended = True
        audit_write(user=self.user, record=self.record, outcome=outcome, error=error, started=self.started)

    def ok(self) -> None:
        self._end(AuditEvent.Outcome.OK, "")

    def refused(self, message: str) -> None:
        """``denied``: a refusal only the action could decide (the owner of a saved view)."""
        self._end(AuditEvent.Outcome.DENIED, message)

    def error(self, message: str) -> None:
        """``error`` with the message the caller is shown (bad input, an unknown object)."""
        self._end(AuditEvent.Outcome.ERROR, message)

    def failed(self, exc: Exception) -> None:
        """The row of an action that raised ``exc``: ``denied`` for a refusal (PermissionDenied, the
        user's job limit), else ``error`` naming it."""
        if isinstance(exc, PermissionDenied):
            self.refused(str(exc))
        else:
            self._end(audit_outcome(exc), _describe(exc))

    @contextmanager
    def guarded(self) -> Iterator[ActionRecord]:
        """Run part of the action: an exception inside ends the attempt with its row and is raised
        again, so the caller answers exactly as it would have without the audit."""
        try:
            yield self.record
        except Exception as exc:
            self.failed(exc)
            raise


def action_attempt(
    *,
    user: UserLike | None,
    conn: str,
    action: str,
    stream: bytes | None = None,
    group: bytes | None = None,
    ids: Sequence[str] = (),
    params: Mapping[str, Any] | None = None,
    target: str = "",
    require: Callable[[], None] | None = None,
) -> ActionAttempt:
    """Open an attempt at ``action``: :func:`action_authorize`, then ``require`` (a refusal a setting
    adds on top of the table: ``BUSCONSOLE_EXPORT_ROLE``, ``BUSCONSOLE_UNMASKED_ROLES``; it raises
    PermissionDenied). A refusal is the attempt's ``denied`` row, and is raised."""
    record = ActionRecord(
        action=action, conn=conn, stream=stream, group=group, ids=list(ids), params=dict(params or {}), target=target
    )
    attempt = ActionAttempt(user=user, record=record, started=time.monotonic())
    try:
        action_authorize(user=user, action=action)
        if require is not None:
            require()
    except PermissionDenied as exc:
        attempt.refused(str(exc))
        raise
    return attempt


def action_check(
    *,
    user: UserLike | None,
    conn: str,
    action: str,
    stream: bytes | None = None,
    params: Mapping[str, Any] | None = None,
    target: str = "",
    require: Callable[[], None] | None = None,
) -> None:
    """The checks of :func:`action_attempt` alone, before anything is attempted (a form shown back with
    its errors has no row): a refusal is written and raised; when allowed nothing is written, and the
    action's own :func:`action_audit` writes the row of its attempt."""
    action_attempt(user=user, conn=conn, action=action, stream=stream, params=params, target=target, require=require)


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
    target: str = "",
) -> Iterator[ActionRecord]:
    """Check that ``user`` may run ``action``, run the block, and write one audit row either way.

    A refusal is written as ``denied`` and raised before the block runs (or from inside it, as
    PermissionDenied, when only the block can tell); any other exception inside the
    block (an invalid argument, Redis refusing or unreachable) is written as ``error`` and raised
    again, so the caller answers exactly as it would have without the audit. The block may fill in
    the record (IDs it resolved, parameters, ``affected``) as it goes. ``target`` names what the action
    changes when that is not a stream (an alert rule), for the audit page.
    """
    attempt = action_attempt(
        user=user, conn=conn, action=action, stream=stream, group=group, ids=ids, params=params, target=target
    )
    with attempt.guarded() as record:
        yield record
    attempt.ok()
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
    validate: Callable[[], T],
    stream: bytes | None = None,
    group: bytes | None = None,
    require: Callable[[], None] | None = None,
) -> T:
    """Check the caller may run ``action``, then call ``validate`` (the view's check of its input).

    Views call this before the ``<entity>_<verb>`` function, so a viewer gets a 403 whatever they
    sent, and a refused or malformed request still leaves its one audit row (the action function,
    which writes the row of the attempt itself, is then never reached). ``validate`` returns the
    cleaned input or raises InvalidArgument; the form that does so belongs to the screen, which is
    why it is passed in rather than named here. ``require``: as for :func:`action_attempt`.
    """
    attempt = action_attempt(user=user, conn=conn, action=action, stream=stream, group=group, require=require)
    try:
        return validate()
    except InvalidArgument as exc:
        attempt.error(exc.message)
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


def audit_outcome(exc: Exception) -> str:
    """How an action that raised ``exc`` is audited: ``denied`` for a refusal decided inside the action
    (the user's job limit, :class:`~streams_app.jobs.runner.JobLimitReached`), else ``error``."""
    return AuditEvent.Outcome.DENIED if isinstance(exc, JobLimitReached) else AuditEvent.Outcome.ERROR


def _describe(exc: Exception) -> str:
    if isinstance(exc, OpsError):
        return exc.message
    return f"{type(exc).__name__}: {exc}"
