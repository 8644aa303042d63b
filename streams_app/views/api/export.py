"""``/api/v1/c/<conn>/streams/<key>/export``: GET streams a range as NDJSON, CSV or Parquet; POST starts
a background export (``{"job": id}``), whose file ``GET ...export?job=<id>`` downloads once it is done.

The range is ``from``..``to``, both included (entry IDs, millisecond or ISO-8601 times, ``-``/``+``);
``q`` keeps the entries a search query matches. See :mod:`streams_app.exports` for the formats and
:mod:`streams_app.services.exports` for who may export and the audit row.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Literal

from django.http import Http404, HttpRequest, JsonResponse
from django.http.response import HttpResponseBase
from pydantic import ConfigDict, Field

from streams_app import services
from streams_app.exports.formats import CONTENT_TYPES
from streams_app.jobs.models import Job
from streams_app.jobs.runner import KIND_EXPORT
from streams_app.redis_ops import client
from streams_app.views import links
from streams_app.views.api.endpoint import api_endpoint, api_methods, read_json
from streams_app.views.api.replies import Reply
from streams_app.views.api.schemas import I64_MAX, Body, Query, parse, position, query_int, text
from streams_app.views.export import job_file_response, streamed

Format = Literal["ndjson", "csv", "parquet"]


class ExportQuery(Query):
    """``format`` (default ndjson), the range ``from``..``to`` (both included), the search ``q``; or
    ``job``: the file of a finished background export of this stream."""

    format: Format = "ndjson"
    start: position("-", "0") = Field("-", alias="from")  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    end: position("+", "$") = Field("+", alias="to")  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    q: text(max_length=2000) = ""  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    job: query_int(ge=1, le=I64_MAX) | None = None  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class ExportBody(Body):
    """Export ``from``..``to`` (both included) in ``format`` as a background job, keeping what ``q``
    matches; the job's page and ``GET .../export?job=<id>`` give the file when it is done."""

    format: Format = "ndjson"
    start: position("-", "0") = Field("-", alias="from")  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    end: position("+", "$") = Field("+", alias="to")  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    q: text(max_length=2000) = ""  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type

    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        frozen=True,
        populate_by_name=False,
        json_schema_extra={"examples": [{"format": "parquet", "from": "-", "to": "+", "q": ""}]},
    )


class ExportJobReply(Reply):
    """The background export: its id, its page and API address, and where its file will be."""

    job: int
    url: str
    api_url: str
    download_url: str


_QUERY_NAMES = ("format", "from", "to", "q", "job")


@api_endpoint(
    method="GET",
    summary="Export a range (NDJSON, CSV or Parquet), streamed",
    tag="streams",
    action="export",
    query=ExportQuery,
    replies={200: None},
    content_type=tuple(CONTENT_TYPES.values()),
    errors=(403, 409),
)
def export_read(request: HttpRequest, conn: str, key: bytes) -> HttpResponseBase:
    """The body is the file (``Content-Disposition: attachment``), produced one XRANGE page at a time.
    A range over the direct-download limit is a 400: POST starts a background export instead."""
    client.connection(conn)
    given = {name: request.GET[name] for name in _QUERY_NAMES if name in request.GET}
    params = services.export_input(
        user=request.user, conn=conn, key=key, action="export", validate=partial(parse, ExportQuery, given)
    )
    if params.job is not None:
        return _job_file(request, conn, key, params.job)
    download = services.stream_export_download(
        user=request.user,
        conn=conn,
        key=key,
        start=params.start,
        end=params.end,
        fmt=params.format,
        q=params.q,
    )
    return streamed(request, download.chunks, filename=download.filename, content_type=download.content_type)


def _job_file(request: HttpRequest, conn: str, key: bytes, job_id: int) -> HttpResponseBase:
    job = Job.objects.filter(pk=job_id, kind=KIND_EXPORT, connection=conn).first()
    if job is None or job.parameters.get("key") != key.hex():
        raise Http404("No export job of this stream has that id.")
    path = services.export_job_file(user=request.user, job=job)
    if path is None:
        state = "expired" if job.state == Job.State.DONE else job.state
        return JsonResponse(
            {
                "error": {
                    "code": "not_ready",
                    "message": f"Export job {job.pk} has no file to download: it is {state}.",
                }
            },
            status=409,
        )
    return job_file_response(request, job, path)


@api_endpoint(
    method="POST",
    summary="Export a range as a background job",
    tag="streams",
    action="export.job",
    body=ExportBody,
    replies={202: ExportJobReply},
)
def export_job(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    """The job reads the range in pages and writes the file; follow it at ``api_url``."""
    client.connection(conn)
    body: dict[str, Any] = read_json(request)
    data = services.export_input(
        user=request.user, conn=conn, key=key, action="export.job", validate=partial(parse, ExportBody, body)
    )
    job = services.stream_export_job(
        user=request.user, conn=conn, key=key, start=data.start, end=data.end, fmt=data.format, q=data.q
    )
    download = f"{links.api_stream_url(conn, key)}export?job={job.pk}"
    return JsonResponse(
        {
            "job": job.pk,
            "url": links.job_url(job.pk),
            "api_url": f"/api/v1/jobs/{job.pk}",
            "download_url": download,
        },
        status=202,
    )


#: The one route of ``.../export``: GET streams, POST starts a job.
export_route = api_methods(export_read, export_job)
