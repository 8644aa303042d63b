"""Export a stream's range (stream and DLQ pages' "Export" form): a streamed download, a background job,
and the download of a finished job's file.

Streamed bodies are bounded whichever server runs the console: under ASGI the chunks are produced by
an async generator that asks for the next page in a worker thread (a sync iterator would be read to
its end into memory first: Django warns "StreamingHttpResponse must consume synchronous iterators");
under WSGI the sync generator itself is handed to the server. Either way one page is in memory.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from functools import partial
from pathlib import Path

from asgiref.sync import sync_to_async
from django import forms
from django.conf import settings
from django.contrib import messages
from django.core.handlers.wsgi import WSGIRequest
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from streams_app import services
from streams_app.exports import formats
from streams_app.exports.files import download_name
from streams_app.jobs.models import Job
from streams_app.views import links
from streams_app.views.action_forms import PositionField
from streams_app.views.common import connection_context, render_screen
from streams_app.views.forms import validated

#: Bytes read from a job's file per chunk of its download.
FILE_CHUNK = 256 * 1024
_END = object()


class ExportForm(forms.Form):
    """``from``/``to`` (both included; IDs, millisecond or ISO times, ``-``/``+``), ``format``, ``q``."""

    format = forms.ChoiceField(required=False, choices=[(f, f) for f in formats.FORMATS])
    q = forms.CharField(required=False, max_length=2000, strip=True)


# ``from`` is a Python keyword: the two bounds are added by name.
ExportForm.base_fields["from"] = PositionField(required=False, specials=("-", "0"))
ExportForm.base_fields["to"] = PositionField(required=False, specials=("+", "$"))


def export_params(data) -> dict[str, str]:
    """The service's keyword arguments from a page's query string or form."""
    params = validated(ExportForm, data)
    return {
        "start": params["from"] or "-",
        "end": params["to"] or "+",
        "fmt": params["format"] or "ndjson",
        "q": params["q"] or "",
    }


async def _async_chunks(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    """``chunks`` for an ASGI server: each next chunk made in a worker thread, the generator closed
    (so its audit row is written) however the response ends."""
    try:
        while (chunk := await sync_to_async(next)(chunks, _END)) is not _END:  # type: ignore[call-arg]  # next's default: asgiref's typing keeps only its one-argument form
            yield chunk
    finally:
        await sync_to_async(getattr(chunks, "close", lambda: None))()


def streamed(
    request: HttpRequest, chunks: Iterator[bytes], *, filename: str, content_type: str
) -> StreamingHttpResponse:
    """A download of ``chunks``, bounded in memory under ASGI and WSGI alike (see the module docstring)."""
    content = chunks if isinstance(request, WSGIRequest) else _async_chunks(chunks)
    response = StreamingHttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "no-store"
    return response


def _file_chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as handle:
        while chunk := handle.read(FILE_CHUNK):
            yield chunk


def job_file_response(request: HttpRequest, job: Job, path: Path) -> StreamingHttpResponse:
    key = bytes.fromhex(job.parameters["key"])
    fmt = job.parameters["format"]
    return streamed(
        request, _file_chunks(path), filename=download_name(key, fmt), content_type=formats.CONTENT_TYPES[fmt]
    )


@require_http_methods(["GET", "POST"])
def stream_export(request: HttpRequest, conn: str, key: bytes) -> HttpResponseBase:
    """The range as a file, streamed page by page; too big a range is refused (use the job).

    A link (GET) or the page's form, which POSTs because its other button starts a job and both
    share one set of inputs (a GET form would put the CSRF token in the URL). Nothing changes.
    """
    connection_context(request, conn)
    data = request.POST if request.method == "POST" else request.GET
    params = services.export_input(
        user=request.user, conn=conn, key=key, action="export", validate=partial(export_params, data)
    )
    download = services.stream_export_download(user=request.user, conn=conn, key=key, **params)
    return streamed(request, download.chunks, filename=download.filename, content_type=download.content_type)


@require_POST
def stream_export_job(request: HttpRequest, conn: str, key: bytes) -> HttpResponse:
    """Start a background export; its page shows the progress and, when done, the download link."""
    connection_context(request, conn)
    params = services.export_input(
        user=request.user,
        conn=conn,
        key=key,
        action="export.job",
        validate=partial(export_params, request.POST),
    )
    job = services.stream_export_job(user=request.user, conn=conn, key=key, **params)
    messages.success(request, f"Export job {job.pk} started: its file is linked here when it is ready.")
    return HttpResponseRedirect(links.job_url(job.pk))


@require_GET
def export_download(request: HttpRequest, job_id: int) -> HttpResponseBase:
    """A finished export job's file; before that (or once expired), a page that says where it stands."""
    job = get_object_or_404(Job.objects.select_related("created_by"), pk=job_id)
    request.console_conn = job.connection  # type: ignore[attr-defined]  # the error middleware reads it back (getattr) to name the connection
    path = services.export_job_file(user=request.user, job=job)
    if path is None:
        return render_screen(
            request,
            "streams_app/export_file.html",
            {
                "job": job,
                "job_url": links.job_url(job.pk),
                "retention_h": settings.BUSCONSOLE_EXPORT_RETENTION_H,
            },
        )
    return job_file_response(request, job, path)
