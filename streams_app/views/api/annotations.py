"""Annotations over the JSON API: ``POST /api/v1/annotations`` writes one, ``GET`` lists them.

Like Grafana's annotations API: a deploy script posts ``{"text": "deploy v1.4", "tags": ["deploy"]}``
(the time defaults to now) and the marker shows on every chart whose window holds it, and on the
incident timeline. ``time`` and ``time_end`` take milliseconds since the epoch (what Grafana takes) or
an ISO-8601 date-time; ``connection`` and ``stream`` narrow where it shows. Writing needs the operator
role and leaves one audit row (:mod:`streams_app.services.annotations`).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any

from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from pydantic import ConfigDict, Field, PlainValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

from streams_app import services
from streams_app.annotations.models import TAG_MAX, TAGS_MAX, TEXT_MAX, Annotation
from streams_app.redis_ops.errors import InvalidArgument
from streams_app.redis_ops.ids import parse_time
from streams_app.views.api.endpoint import api_endpoint, api_methods, read_json
from streams_app.views.api.replies import Reply, example
from streams_app.views.api.schemas import (
    DATE_TIME_PATTERN,
    EXAMPLE_TIME,
    I64_MAX,
    Body,
    Query,
    parse,
    query_int,
    text,
)
from streams_app.views.paging import newest_first

#: The last millisecond Python's datetime holds (9999-12-31T23:59:59.999Z).
MS_MAX = 253_402_300_799_999
CONN_PATTERN = r"^[A-Za-z0-9_.-]{1,100}$"
_EXAMPLE_MS = 1_795_350_600_000
_DATE_TIME = re.compile(DATE_TIME_PATTERN.removeprefix("^").removesuffix("$")).fullmatch
_CONN = re.compile(CONN_PATTERN.removeprefix("^").removesuffix("$")).fullmatch


def _moment(value: object) -> datetime:
    """Milliseconds since the epoch (a JSON integer) or an ISO-8601 date-time, as an aware UTC datetime."""
    try:
        if isinstance(value, int) and not isinstance(value, bool):
            if not 0 <= value <= MS_MAX:
                raise ValueError
            return datetime.fromtimestamp(value / 1000, tz=UTC)
        if isinstance(value, str) and _DATE_TIME(value):
            return datetime.fromtimestamp(parse_time(value) / 1000, tz=UTC)
    except (ValueError, OverflowError, InvalidArgument):
        pass
    raise PydanticCustomError(
        "time", f"give milliseconds since the epoch (0 to {MS_MAX}) or an ISO-8601 date-time (e.g. {EXAMPLE_TIME})"
    )


Moment = Annotated[
    datetime,
    PlainValidator(_moment),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 0, "maximum": MS_MAX},
                {"type": "string", "pattern": DATE_TIME_PATTERN},
            ],
            "examples": [_EXAMPLE_MS, EXAMPLE_TIME],
        }
    ),
]
"""A time: milliseconds since the epoch, or an ISO-8601 date-time (naive is UTC)."""

QueryMoment = Annotated[
    datetime,
    PlainValidator(_moment),
    WithJsonSchema({"type": "string", "pattern": DATE_TIME_PATTERN, "examples": [EXAMPLE_TIME]}),
]
"""A time in a query string: an ISO-8601 date-time."""


Tag = text(min_length=1, max_length=TAG_MAX)
ConnName = Annotated[str, Field(pattern=CONN_PATTERN)]


class AnnotationBody(Body):
    """A note at ``time`` (default: now), or over ``time`` to ``time_end`` (at most 31 days). Without
    ``connection`` it shows on the charts of every connection; with it, on that connection's; with
    ``stream`` too (the key as text), on that stream's, its groups' and its DLQ's charts only."""

    text: text(min_length=1, max_length=TEXT_MAX)  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    time: Moment | None = None
    time_end: Moment | None = None
    tags: Annotated[list[Tag], Field(max_length=TAGS_MAX)] = []  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    connection: ConnName | None = None
    stream: text(min_length=1, max_length=1000) | None = None  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type

    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        frozen=True,
        json_schema_extra={
            "examples": [{"text": "deploy v1.4 of billing", "tags": ["deploy"], "connection": "default",
                          "stream": "orders"}]
        },
    )


class AnnotationsQuery(Query):
    """Annotations meeting ``[from, to]`` (date-times) that the charts of ``connection`` (and of its
    ``stream``) show: those of every connection count too. ``before`` is the "older than" cursor (an id)."""

    from_: QueryMoment | None = Field(None, alias="from")
    to: QueryMoment | None = None
    connection: ConnName | None = None
    stream: text(min_length=1, max_length=1000) | None = None  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    before: query_int(ge=1, le=I64_MAX) | None = None  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    count: query_int(ge=1, le=500) = 100  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type


class AnnotationRow(Reply):
    """One annotation: ``time_end`` equals ``time`` for a moment; ``connection`` null: every connection."""

    id: int
    time: str
    time_end: str
    time_ms: int
    time_end_ms: int
    text: str
    tags: list[str]
    connection: str | None
    stream: str | None
    user: str
    created_at: str

    model_config = example(
        {"id": 3, "time": "2026-11-22T10:30:00+00:00", "time_end": "2026-11-22T10:30:00+00:00",
         "time_ms": _EXAMPLE_MS, "time_end_ms": _EXAMPLE_MS, "text": "deploy v1.4 of billing", "tags": ["deploy"],
         "connection": "default", "stream": "orders", "user": "otto", "created_at": "2026-11-22T10:30:01+00:00"}
    )


class AnnotationsReply(Reply):
    annotations: list[AnnotationRow]
    next: int | None


def _ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)


def annotation_json(a: Annotation) -> dict[str, Any]:
    return {
        "id": a.pk,
        "time": a.at.isoformat(),
        "time_end": a.end_at.isoformat(),
        "time_ms": _ms(a.at),
        "time_end_ms": _ms(a.end_at),
        "text": a.text,
        "tags": list(a.tags),
        "connection": a.connection or None,
        "stream": a.key_text if a.key_hash else None,
        "user": a.username,
        "created_at": a.created_at.isoformat(),
    }


def _query(request: HttpRequest) -> AnnotationsQuery:
    names = {field.alias or name for name, field in AnnotationsQuery.model_fields.items()}
    return parse(AnnotationsQuery, {name: request.GET[name] for name in names if name in request.GET})


@api_endpoint(
    method="GET",
    summary="Annotations (deploy markers, notes), newest first",
    tag="annotations",
    query=AnnotationsQuery,
    replies={200: AnnotationsReply},
)
def annotations_list(request: HttpRequest) -> JsonResponse:
    """Newest written first, at most ``count`` (500)."""
    params = _query(request)
    key = params.stream.encode() if params.stream is not None else None
    if key is not None and params.connection is None:
        raise InvalidArgument("stream: name its connection too.")
    rows = Annotation.objects.shown_on(conn=params.connection, keys=[key] if key is not None else [])
    if params.from_ is not None:
        rows = rows.filter(end_at__gte=params.from_)
    if params.to is not None:
        rows = rows.filter(at__lte=params.to)
    page = newest_first(rows, before=params.before, size=params.count)
    return JsonResponse({"annotations": [annotation_json(a) for a in page.rows], "next": page.older})


@api_endpoint(
    method="POST",
    summary="Write an annotation (a deploy marker, a note)",
    tag="annotations",
    body=AnnotationBody,
    action="annotation.create",
    replies={201: AnnotationRow},
)
def annotation_add(request: HttpRequest) -> JsonResponse:
    """Shown on every chart whose window holds it and on the incident timeline; one audit row."""
    body = read_json(request)
    named = body.get("connection")
    data = services.action_input(
        user=request.user, conn=named if isinstance(named, str) and _CONN(named) else "",
        action="annotation.create", validate=lambda: parse(AnnotationBody, body),
    )
    at = data.time or timezone.now()
    annotation = services.annotation_create(
        user=request.user,
        at=at,
        end_at=data.time_end,
        text=data.text,
        tags=data.tags,
        conn=data.connection or "",
        key=data.stream.encode() if data.stream is not None else None,
    )
    return JsonResponse(annotation_json(annotation), status=201)


#: ``/api/v1/annotations``: GET lists, POST writes.
annotations_route = api_methods(annotations_list, annotation_add)
