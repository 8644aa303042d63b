"""Export a range of a stream (or the entries of it a search matches) as NDJSON, CSV or Parquet.

Who may export is ``ACTION_ROLES["export"]`` (a viewer's floor: it is a read) raised by the setting
``BUSCONSOLE_EXPORT_ROLE`` (``viewer``, ``operator``, ``admin``, or ``none``: off for everyone, admins
included), checked here for the page and the API alike. Read-only mode does not stop an export.

Every export leaves one audit row (action ``export``): who, the stream, the range asked and the exact
IDs it became, the format, the query (with ``too_costly``: how many entries it left out because their
own data made it too costly to evaluate), and in ``affected`` the entries written. A streamed download
writes it when its last byte has been produced (``error`` if it stopped early, with the count so far);
a background export writes ``export.job`` when it is asked for (with the job's id), and the job adds
its ``export.finished`` row with the count, as every job does (its note, and the row, say how many
entries were too costly to evaluate).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from django.conf import settings
from django.core.exceptions import PermissionDenied

from streams_app.accounts.roles import ROLE_GROUPS, Role, require_role, role_of
from streams_app.exports import files, formats, reader
from streams_app.jobs import runner as jobs
from streams_app.jobs.models import Job
from streams_app.masking.apply import search_mask
from streams_app.redis_ops import conventions
from streams_app.redis_ops.errors import InvalidArgument
from streams_app.services.audit import ActionAttempt, action_attempt, action_input

if TYPE_CHECKING:
    from streams_app.accounts.roles import UserLike

T = TypeVar("T")
_BACKGROUND = 'start a background export instead (the page\'s "Export in background", or POST to the API).'
EXPORT_OFF = "Exports are switched off on this console (BUSCONSOLE_EXPORT_ROLE=none)."


@dataclass(frozen=True)
class ExportDownload:
    """A streamed export: its chunks (a generator, one chunk per page read), name and media type."""

    chunks: Iterator[bytes]
    filename: str
    content_type: str


def export_role() -> Role | None:
    """The least role that may export now (None: nobody), never below ACTION_ROLES' floor."""
    name = settings.BUSCONSOLE_EXPORT_ROLE
    return None if name == "none" else ROLE_GROUPS[name]


def _export_require(user: UserLike | None) -> Callable[[], None]:
    """The export setting, checked by the gate after the role table (a refusal is its ``denied`` row)."""

    def require() -> None:
        required = export_role()
        if required is None:
            raise PermissionDenied(EXPORT_OFF)
        require_role(user, required)

    return require


def export_input(
    *, user: UserLike | None, conn: str, key: bytes, action: str, validate: Callable[[], T]
) -> T:
    """The role check of an export (403 whatever was sent), then ``validate`` (the caller's check of its
    input); a refusal or a malformed request leaves its one audit row, as ``action_input`` does."""
    return action_input(
        user=user, conn=conn, action=action, stream=key, validate=validate, require=_export_require(user)
    )


def export_allowed(*, user: UserLike | None) -> bool:
    """Whether ``user`` may export now (pages show the form only then; the check is in the calls)."""
    required = export_role()
    return required is not None and role_of(user) >= required


def _prepare(
    *, user: UserLike | None, conn: str, key: bytes, action: str, start: str, end: str, fmt: str, q: str
) -> tuple[ActionAttempt, str, str, reader.Predicate | None, bool]:
    """Authorize, check the input and resolve the range; an error after the role check is the attempt's
    row (``error``; ``denied`` for the user's job limit), raised again for the view."""
    attempt = action_attempt(
        user=user, conn=conn, action=action, stream=key, params={"from": start, "to": end, "format": fmt, "q": q},
        require=_export_require(user),
    )
    with attempt.guarded() as record:
        if fmt not in formats.FORMATS:
            raise InvalidArgument(f"format must be one of {', '.join(formats.FORMATS)}, not {fmt[:20]!r}.")
        dlq = bool(conventions.detect_dlq(key))
        matches = reader.export_matcher(q, dlq=dlq)
        first, last = reader.range_bounds(conn, key, start, end)
        record.params.update(start_id=first, end_id=last)
    return attempt, first, last, matches, dlq


def stream_export_download(
    *,
    user: UserLike | None,
    conn: str,
    key: bytes,
    start: str = "-",
    end: str = "+",
    fmt: str = "ndjson",
    q: str = "",
) -> ExportDownload:
    """A streamed export of ``[start, end]`` (both included) of ``key``; the audit row comes at its end.

    Refused (400) before anything is sent, as a background export's work (:func:`stream_export_job`,
    cancellable, one per user, on the jobs' own workers): a range over ``BUSCONSOLE_EXPORT_STREAM_MAX``
    entries, and a query whose evaluation over the range costs more than
    ``BUSCONSOLE_EXPORT_STREAM_BUDGET_S`` by the expression alone (:func:`reader.evaluation_bound`:
    bounded before it runs, as every query is). Entries whose own data makes it dearer are caught as it
    runs: once its evaluations have spent the budget, the download stops incomplete (the connection is
    cut before its end, so no client takes it for the whole file) and its audit row says why.
    """
    attempt, first, last, predicate, _ = _prepare(
        user=user, conn=conn, key=key, action="export", start=start, end=end, fmt=fmt, q=q
    )
    limit = settings.BUSCONSOLE_EXPORT_STREAM_MAX
    with attempt.guarded():
        size = reader.range_size(conn, key, start=first, end=last, limit=limit)
        if size > limit:
            raise InvalidArgument(
                f"This range holds more than {limit} entries, too many for a direct download: {_BACKGROUND}"
            )
        worst = reader.evaluation_bound(predicate.query if predicate is not None else None, size)
        budget = settings.BUSCONSOLE_EXPORT_STREAM_BUDGET_S
        if worst > budget:
            raise InvalidArgument(
                f"Evaluating this query over the range's {size} entries could take up to {worst:.0f} s, "
                f"more than a direct download may ({budget} s): {_BACKGROUND}"
            )
    matches = reader.budgeted(predicate, budget) if predicate is not None else None
    chunks = _audited(
        user, attempt, conn=conn, key=key, first=first, last=last, fmt=fmt, matches=matches,
        predicate=predicate,
    )  # fmt: skip
    return ExportDownload(
        chunks=chunks, filename=files.download_name(key, fmt), content_type=formats.CONTENT_TYPES[fmt]
    )


def _audited(
    user: UserLike | None,
    attempt: ActionAttempt,
    *,
    conn: str,
    key: bytes,
    first: str,
    last: str,
    fmt: str,
    matches: reader.Matches | None,
    predicate: reader.Predicate | None,
) -> Iterator[bytes]:
    """The export's chunks, then its one audit row (``error`` when it stopped early: a client that
    went away, Redis gone mid-way), with the entries written in ``affected`` and, with a query, in
    ``too_costly`` the entries it left out because their own data made it too costly to evaluate
    (``predicate``'s count: so a left-out entry is never taken for a plain non-match)."""
    tally = reader.Tally()
    failure: Exception | None = None
    done = False
    try:
        mask = search_mask(user, conn, key)  # an export never reveals masked values
        yield from reader.export_bytes(
            conn, key, start=first, end=last, fmt=fmt, matches=matches, tally=tally, mask=mask
        )
        done = True
    except Exception as exc:
        failure = exc
        raise
    finally:  # also when the client went away (GeneratorExit): the row says it stopped early
        record = attempt.record
        record.affected = tally.written
        record.params["scanned"] = tally.scanned
        if predicate is not None:
            record.params["too_costly"] = predicate.too_costly
        if done:
            attempt.ok()
        elif failure is not None:
            attempt.failed(failure)
        else:
            attempt.error("The download stopped before its end.")


def stream_export_job(
    *,
    user: UserLike | None,
    conn: str,
    key: bytes,
    start: str = "-",
    end: str = "+",
    fmt: str = "ndjson",
    q: str = "",
) -> Job:
    """Start a background export of ``[start, end]`` of ``key``; its page links the file when done."""
    attempt, first, last, _, dlq = _prepare(
        user=user, conn=conn, key=key, action="export.job", start=start, end=end, fmt=fmt, q=q
    )
    with attempt.guarded() as record:
        params: dict[str, Any] = {"start": first, "end": last, "format": fmt, "q": q, "dlq": dlq}
        job = jobs.job_create(kind=jobs.KIND_EXPORT, conn=conn, user=user, key=key, parameters=params)
        record.params["job"] = job.pk
    attempt.ok()
    return job


def export_job_file(*, user: UserLike | None, job: Job) -> Path | None:
    """The file of a finished export job, for its creator or an admin who may export; None while it
    is not ready (or expired). Refusals are PermissionDenied (403), as for the export itself."""
    _export_require(user)()
    path = files.export_file(job)
    owner = job.created_by_id is not None and getattr(user, "pk", None) == job.created_by_id
    if path is not None and not owner and role_of(user) < Role.ADMIN:
        raise PermissionDenied("Only whoever started this export (or an admin) may download its file.")
    return path
