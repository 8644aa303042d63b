"""Background jobs: the list, and one job's page with its progress (refreshed live by htmx)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET, require_POST

from streams_app import services
from streams_app.jobs import runner
from streams_app.jobs.models import Job
from streams_app.redis_ops.errors import OpsError
from streams_app.views import links
from streams_app.views.action_forms import JobsForm
from streams_app.views.common import render_screen
from streams_app.views.forms import validated
from streams_app.views.paging import newest_first

if TYPE_CHECKING:
    from streams_app.accounts.roles import UserLike

PAGE = 50


@dataclass(frozen=True, slots=True)
class KindDisplay:
    """How a job kind is shown: what its ``done``/``total`` count, and which of its fields apply.

    A pipeline run counts steps and works on every connection, so its page has no Connection or
    Stream to show; requeue and replay count entries of one key on one connection.
    """

    unit: str  # plural: "7 of 7 steps"
    key_label: str | None  # the row naming the job's key; None: the kind has no key
    connection: bool  # whether the job belongs to one connection
    scope: str  # what the job works on, said once where Connection and key do not apply


_ENTRIES = "entries"
KIND_DISPLAY = {
    runner.KIND_REQUEUE_ALL: KindDisplay(unit=_ENTRIES, key_label="DLQ", connection=True, scope=""),
    runner.KIND_REQUEUE_FILTERED: KindDisplay(unit=_ENTRIES, key_label="DLQ", connection=True, scope=""),
    runner.KIND_REPLAY: KindDisplay(unit=_ENTRIES, key_label="Stream", connection=True, scope=""),
    runner.KIND_PIPELINE: KindDisplay(
        unit="steps",
        key_label=None,
        connection=False,
        scope="Every configured connection: export to the lake, five Spark rollups, load into the reports.",
    ),
}
_UNKNOWN_KIND = KindDisplay(unit=_ENTRIES, key_label="Stream", connection=True, scope="")


def kind_display(kind: str) -> KindDisplay:
    return KIND_DISPLAY.get(kind, _UNKNOWN_KIND)


def job_links(job: Job) -> dict[str, str | None]:
    """Where a job's key (a DLQ or a stream) and its target live, for its page and the API."""
    params = job.parameters or {}
    key = bytes.fromhex(params.get("key", ""))
    out: dict[str, str | None] = {"key": None, "target": None}
    if key and job.connection:
        is_dlq = job.kind in (runner.KIND_REQUEUE_ALL, runner.KIND_REQUEUE_FILTERED)
        out["key"] = links.dlq_url(job.connection, key) if is_dlq else links.stream_url(job.connection, key)
    if params.get("target") and job.connection:
        out["target"] = links.stream_url(job.connection, bytes.fromhex(params["target"]))
    return out


@require_GET
def jobs_list(request: HttpRequest) -> HttpResponse:
    params = validated(JobsForm, request.GET)
    rows = Job.objects.select_related("created_by")
    if params["state"]:
        rows = rows.filter(state=params["state"])
    page = newest_first(rows, before=params["before"], size=PAGE)
    context = {
        "jobs": [(job, kind_display(job.kind)) for job in page.rows],
        "older": page.older,
        "params": params,
        "states": [state.value for state in Job.State],
    }
    return render_screen(request, "streams_app/jobs.html", context, partial="rows")


def job_percent(job: Job) -> int | None:
    """How far the job is, or None while its total is unknown (or 0): a page never shows a percentage
    it cannot know (it once said "45 of ? entries (100%)"); it says what was done so far instead."""
    if not job.total:
        return None
    return min(100, round(100 * job.done / job.total))


def _may(user: UserLike | None, action: str) -> bool:
    """Whether the page offers ``action``'s button: the role table's answer (a courtesy: the POST is
    checked again where it runs)."""
    try:
        services.action_authorize(user=user, action=action)
    except PermissionDenied:
        return False
    return True


@require_GET
def job_detail(request: HttpRequest, job_id: int) -> HttpResponse:
    """The job's page; while it runs, htmx swaps its progress section every second, buttons included,
    so Cancel and Nudge leave the page the moment the job ends."""
    job = get_object_or_404(Job.objects.select_related("created_by"), pk=job_id)
    context = {
        "job": job,
        "percent": job_percent(job),
        "links": job_links(job),
        "url": links.job_url(job.pk),
        "display": kind_display(job.kind),
        "may_cancel": not job.is_finished
        and _may(request.user, services.job_cancel_action(user=request.user, job=job)),
        "may_resume": job.state != Job.State.DONE and _may(request.user, "job.resume"),
    }
    return render_screen(request, "streams_app/job.html", context, partial="progress")


def _job_action(request: HttpRequest, job_id: int, verb: str) -> HttpResponse:
    job = get_object_or_404(Job, pk=job_id)
    request.console_conn = job.connection  # type: ignore[attr-defined]  # the error middleware reads it back (getattr) to name the connection
    try:
        if verb == "cancel":
            job = services.job_cancel(user=request.user, job=job)
            messages.success(request, f"Job {job.pk} is {job.state}.")
        else:
            job = services.job_resume(user=request.user, job=job)
            messages.success(request, f"Job {job.pk} will continue from where it stopped.")
    except OpsError as exc:
        messages.error(request, exc.message)
    return HttpResponseRedirect(links.job_url(job.pk))


@require_POST
def job_cancel(request: HttpRequest, job_id: int) -> HttpResponse:
    return _job_action(request, job_id, "cancel")


@require_POST
def job_resume(request: HttpRequest, job_id: int) -> HttpResponse:
    return _job_action(request, job_id, "resume")
