"""The JSON API of the event bus's delayed retries: list the retry sets, read one stream's schedule,
retry now, move to the DLQ, delete (the retries page's buttons, same services, same audit rows).

A retry is named by its ``ref``, ``<due ms>-<sha1 of the member>``, as the reads return it. ``all``
with ``up_to`` (a due time in ms, the latest the caller saw) takes every retry due by then; with
``dry_run`` it only counts them.
"""

from __future__ import annotations

from typing import Annotated, Any, Self

from django.http import HttpRequest, JsonResponse
from pydantic import ConfigDict, Field, RootModel, StringConstraints, model_validator

from eventbus.decoding import decode_fields
from eventbus.text import display_text
from streams_app import services
from streams_app.masking.apply import errors_masker
from streams_app.redis_ops import client
from streams_app.redis_ops import retries as retry_reads
from streams_app.redis_ops.actions.retries import RetryOutcome
from streams_app.redis_ops.errors import InvalidArgument
from streams_app.services.retries import ACTIONS
from streams_app.views.api import schemas as s
from streams_app.views.api.endpoint import api_endpoint, body_input, flag, read_json
from streams_app.views.api.replies import Reply
from streams_app.views.masking import request_masker
from streams_app.views.retries import api_retries_url, due_text, retries_url

EXAMPLE_REF = "1700000000000-" + "0" * 40
Ref = Annotated[str, StringConstraints(pattern=r"^[0-9]{1,20}-[0-9a-f]{40}$")]


class RetriesQuery(s.Query):
    """``after`` is the previous page's ``next``; ``legacy`` reads the pre-cluster set ``S:retry``."""

    after: Annotated[str, StringConstraints(pattern=r"^[0-9]{1,20}:[0-9]{1,9}$")] | None = None
    count: s.query_int(ge=1, le=retry_reads.MAX_PAGE) = retry_reads.DEFAULT_PAGE  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    legacy: bool = False


class RetryBody(s.Body):
    """``refs`` now, or ``all`` with ``up_to`` (ms); ``dry_run`` counts what ``all`` would take."""

    refs: Annotated[list[Ref], Field(min_length=1, max_length=1000)] | None = None
    all: bool = False
    up_to: s.Millis | None = None
    legacy: bool = False
    dry_run: bool = False

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"refs": [EXAMPLE_REF]}, {"all": True, "up_to": 1700000000000}]}
    )

    @model_validator(mode="after")
    def _refs_or_all(self) -> Self:
        if self.all:
            if self.up_to is None:
                raise InvalidArgument("up_to: all needs up_to, the latest due time (ms) you saw.")
            if self.refs is not None:
                raise InvalidArgument("Give either refs or all, not both.")
        elif self.refs is None:
            raise InvalidArgument("refs: select at least one retry, or give all: true with up_to.")
        elif self.dry_run:
            raise InvalidArgument("dry_run counts what all would take: give all: true with up_to.")
        return self


class RetrySetRow(Reply):
    key: str
    stream: str
    legacy: bool
    url: str
    api_url: str
    waiting: int
    overdue: int
    next_due_ms: int | None


class RetriesListReply(Reply):
    sets: list[RetrySetRow]
    now_ms: int
    complete: bool
    missed: list[str]


class RetryRow(Reply):
    ref: str
    due_ms: int
    due: str
    retries: int | None
    group: str | None
    type: str | None
    event_id: str | None
    error: str | None
    failed_entry_id: str | None
    fields: list[dict[str, Any]]


class RetriesPageReply(Reply):
    key: str
    stream: str
    legacy: bool
    total: int
    overdue: int
    now_ms: int
    last_due_ms: int | None
    retries: list[RetryRow]
    next: str | None


class RetryTakenReply(Reply):
    """``taken``: each ref with its new entry ID (null for a delete); ``missing`` had left the schedule."""

    target: str | None
    taken: list[dict[str, Any]]
    missing: list[str]
    failed: list[dict[str, str]]
    remaining: int


class RetryCountReply(Reply):
    count: int
    up_to: int


def _text(value: bytes | None) -> str | None:
    return display_text(value) if value is not None else None


@api_endpoint(
    method="GET", summary="List the event bus's retry sets", tag="retries", replies={200: RetriesListReply}
)
def retries_list(request: HttpRequest, conn: str) -> JsonResponse:
    """Sorted sets named ``*:retry`` (both namings), found by a bounded SCAN, with their size and next due time."""
    client.connection(conn)
    listing = services.retry_list(conn=conn)
    return JsonResponse(
        {
            "sets": [
                {
                    "key": display_text(row.rset.key),
                    "stream": display_text(row.rset.stream),
                    "legacy": row.rset.legacy,
                    "url": retries_url(conn, row.rset.stream, legacy=row.rset.legacy),
                    "api_url": api_retries_url(conn, row.rset.stream)
                    + ("?legacy=1" if row.rset.legacy else ""),
                    "waiting": row.waiting,
                    "overdue": row.overdue,
                    "next_due_ms": row.next_due_ms,
                }
                for row in listing.sets
            ],
            "now_ms": listing.now_ms,
            "complete": listing.complete,
            "missed": list(listing.missed),
        }
    )


@api_endpoint(
    method="GET",
    summary="A stream's waiting retries, soonest first",
    tag="retries",
    query=RetriesQuery,
    replies={200: RetriesPageReply},
)
def retries_page(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    client.connection(conn)
    params = s.query(RetriesQuery, request.GET)
    rset = retry_reads.retry_set(key, legacy=params.legacy)
    masker = request_masker(request, conn, key)
    error = errors_masker(conn, key, rset.dlq)
    page = retry_reads.retry_page(conn, rset, after=params.after, count=params.count, mask=masker.entry)
    masker.reveal_record()
    return JsonResponse(
        {
            "key": display_text(rset.key),
            "stream": display_text(key),
            "legacy": rset.legacy,
            "total": page.total,
            "overdue": page.overdue,
            "now_ms": page.now_ms,
            "last_due_ms": page.last_due_ms,
            "retries": [
                {
                    "ref": e.ref,
                    "due_ms": e.due_ms,
                    "due": due_text(e.due_ms, page.now_ms),
                    "retries": e.retries,
                    "group": _text(e.group),
                    "type": _text(e.event_type),
                    "event_id": _text(e.event_id),
                    "error": error(e.error),
                    "failed_entry_id": e.failed_entry_id,
                    "fields": [
                        {
                            "name": f.name,
                            "format": f.decoded.format,
                            "value": f.decoded.value,
                            "truncated": f.decoded.truncated,
                        }
                        for f in decode_fields(e.fields)
                    ],
                }
                for e in page.entries
            ],
            "next": page.next,
        }
    )


def _outcome_json(outcome: RetryOutcome) -> dict[str, Any]:
    return {
        "target": _text(outcome.target),
        "taken": [{"ref": t.ref, "new_id": t.new_id} for t in outcome.taken],
        "missing": list(outcome.missing),
        "failed": [{"ref": ref, "reason": reason} for ref, reason in outcome.failed],
        "remaining": outcome.remaining,
    }


def _act(request: HttpRequest, conn: str, key: bytes, mode: str) -> JsonResponse:
    client.connection(conn)
    body = read_json(request)
    action = ACTIONS[mode] + (".count" if flag(body, "dry_run") else "")
    data = body_input(request, conn, action, RetryBody, body, key=key)
    if data.dry_run:
        assert data.up_to is not None
        count = services.retry_act_count(
            user=request.user, conn=conn, key=key, mode=mode, up_to_ms=data.up_to, legacy=data.legacy
        )
        return JsonResponse({"count": count, "up_to": data.up_to})
    outcome = services.retry_act(
        user=request.user,
        conn=conn,
        key=key,
        mode=mode,
        legacy=data.legacy,
        refs=data.refs or (),
        up_to_ms=data.up_to if data.all else None,
    )
    return JsonResponse(_outcome_json(outcome))


class RetryReply(RootModel[RetryTakenReply | RetryCountReply]):
    """What was taken, or (``dry_run``) how many ``all`` would take."""


_REPLIES = {200: RetryReply}


@api_endpoint(
    method="POST",
    summary="Re-add waiting retries to their stream now",
    tag="retries",
    body=RetryBody,
    action=("retry.now", "retry.now.count"),
    replies=_REPLIES,
)
def retry_now(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    """Exactly as a worker's pump would; a retry the pump takes meanwhile is reported ``missing``, not added twice."""
    return _act(request, conn, key, "stream")


@api_endpoint(
    method="POST",
    summary="Move waiting retries to the stream's DLQ",
    tag="retries",
    body=RetryBody,
    action=("retry.dead_letter", "retry.dead_letter.count"),
    replies=_REPLIES,
)
def retry_dead_letter(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    """Filed in ``{stream}:dlq`` with the event bus's ``dlq_*`` fields."""
    return _act(request, conn, key, "dlq")


@api_endpoint(
    method="POST",
    summary="Delete waiting retries",
    tag="retries",
    body=RetryBody,
    action=("retry.delete", "retry.delete.count"),
    replies=_REPLIES,
)
def retry_delete(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    return _act(request, conn, key, "delete")
