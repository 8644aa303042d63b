"""DLQ triage on the DLQ page: the counts by error signature, group and origin it opens with, each linked
to the filtered list and to "requeue these" (its confirm page, then the job).

The counts come from :func:`streams_app.services.dlq_triage.dlq_triage` (bounded, masked as the viewer
sees the dead letters); the confirm page counts again up to the newest dead letter now and shows the
POST button to the roles that may press it; the POST checks the role, honours read-only mode, writes the
audit row and starts the job (:mod:`streams_app.triage.requeue`).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.views.decorators.http import require_GET

from eventbus.text import display_text
from streams_app.services.dlq_triage import (
    ACTION,
    dlq_requeue_filtered,
    dlq_requeue_filtered_preview,
    dlq_triage,
)
from streams_app.triage.counts import NO_GROUP, NO_ORIGIN, Bucket, TriageCounts, TriageFilter
from streams_app.views import links
from streams_app.views.action_forms import EntryIdField, TriageFilterForm
from streams_app.views.actions import action_view
from streams_app.views.common import connection_context
from streams_app.views.forms import action_data, validated


@dataclass(frozen=True, slots=True)
class TriageRow:
    part: str  # signature, group or origin
    label: str
    missing: bool  # the dead letters record no group (or origin): the label is the page's words
    count: int
    share: float  # of the largest count in its table, for the bar
    list_url: str
    requeue_url: str


@dataclass(frozen=True, slots=True)
class TriageView:
    counts: TriageCounts
    tables: tuple[tuple[str, str, tuple[TriageRow, ...]], ...]  # (part, heading, rows)
    more_url: str | None  # the next older window
    newest_url: str | None  # back to the newest window


def filter_query(where: TriageFilter) -> str:
    return urlencode(where.query())


def triage_view(conn: str, key: bytes, counts: TriageCounts) -> TriageView:
    page = links.dlq_url(conn, key)

    def rows(part: str, buckets: tuple[Bucket, ...], missing_label: str) -> tuple[TriageRow, ...]:
        peak = max((b.count for b in buckets), default=0)
        return tuple(
            TriageRow(
                part=part, label=missing_label if b.value is None else b.value, missing=b.value is None,
                count=b.count, share=b.count / peak if peak else 0.0,
                list_url=f"{page}?{filter_query(b.filter)}#entries",
                requeue_url=f"{page}triage/requeue/confirm/?{filter_query(b.filter)}",
            )  # fmt: skip
            for b in buckets
        )

    return TriageView(
        counts=counts,
        tables=(
            ("signature", "Error signature", rows("signature", counts.signatures, "")),
            ("group", "Group", rows("group", counts.groups, NO_GROUP)),
            ("origin", "Came from", rows("origin", counts.origins, NO_ORIGIN)),
        ),
        more_url=f"{page}?{urlencode({'triage_before': counts.next})}#triage" if counts.next else None,
        newest_url=f"{page}#triage" if counts.before else None,
    )


def triage_context(request: HttpRequest, conn: str, key: bytes, *, before: str | None) -> TriageView:
    """The DLQ page's triage panel (the whole page only: the live refresh of the entries skips it)."""
    return triage_view(conn, key, dlq_triage(user=request.user, conn=conn, key=key, before=before))


class RequeueFilteredForm(TriageFilterForm):
    """The filter and, on the POST, the newest dead letter the count covered and the count confirmed."""

    up_to = EntryIdField(required=False)
    counted = forms.IntegerField(required=False, min_value=0)


def _dlq_page(conn: str, key: bytes) -> str:
    return links.dlq_url(conn, key)


@require_GET
def requeue_filtered_confirm(request: HttpRequest, conn: str, key: bytes) -> HttpResponse:
    """How many dead letters the count's filter matches now, and the button that requeues them."""
    context = connection_context(request, conn)
    data = validated(RequeueFilteredForm, request.GET)
    where = data["filter"] or TriageFilter()
    preview = dlq_requeue_filtered_preview(user=request.user, conn=conn, key=key, where=where)
    page = links.dlq_url(conn, key)
    context.update(
        key=key,
        key_text=display_text(key),
        preview=preview,
        filter_fields=sorted(where.query().items()),
        filter_words=_words(where),
        confirm_url=page + "triage/requeue/",
        list_url=f"{page}?{filter_query(where)}#entries",
        back_url=f"{page}#triage",
    )
    return render(request, "streams_app/dlq_triage_confirm.html", context)


def _words(where: TriageFilter) -> list[tuple[str, str | None]]:
    """The filter as the confirm page states it: (what, value)."""
    out: list[tuple[str, str | None]] = []
    if where.signature is not None:
        out.append(("error signature", where.signature))
    if where.group is not None or where.no_group:
        out.append(("group", NO_GROUP if where.no_group else where.group))
    if where.origin is not None or where.no_origin:
        out.append(("came from", NO_ORIGIN if where.no_origin else where.origin))
    return out


@action_view(_dlq_page)
def requeue_filtered_start(request: HttpRequest, conn: str, key: bytes) -> str | HttpResponse:
    data = action_data(request, conn, ACTION, RequeueFilteredForm, request.POST, key=key)
    if not data["up_to"]:
        return "Nothing to requeue: no dead letter matched when it was counted."
    job = dlq_requeue_filtered(
        user=request.user, conn=conn, key=key, where=data["filter"] or TriageFilter(), up_to=data["up_to"],
        counted=data["counted"],
    )  # fmt: skip
    messages.info(request, f"Requeueing the dead letters of that count in the background (job {job.pk}).")
    return HttpResponseRedirect(links.job_url(job.pk))
