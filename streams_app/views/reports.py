"""``/reports/``: what the data pipeline found, and the operators' "Run pipeline now" button."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from streams_app import services
from streams_app.lake import reports as report_data
from streams_app.lake.models import ErrorSignatureRollup
from streams_app.redis_ops.errors import OpsError
from streams_app.views import links
from streams_app.views.common import render_screen
from streams_app.views.forms import validated


@dataclass(frozen=True, slots=True)
class SignatureLink:
    """A top error signature, with the DLQ page filtered to its entries (None: connection not configured)."""

    rollup: ErrorSignatureRollup
    dlq_url: str | None
    signature: str  # as the masking rules let it show (report_data.SignatureRow)
    example: str


def _signature_link(row: report_data.SignatureRow) -> SignatureLink:
    """The DLQ filtered on the signature itself (``?signature=``), not on a substring of it: two
    signatures sharing their longest literal part ("ValueError: order <num> not found" and "ValueError:
    order <num> was cancelled") would otherwise open the same list."""
    rollup, url = row.rollup, None
    if row.connected:
        # the shown signature: the DLQ page masks before it filters, so a masked one finds its entries
        url = links.dlq_url(rollup.connection, rollup.dlq_bytes) + "?" + urlencode({"signature": row.signature})
    return SignatureLink(rollup=rollup, dlq_url=url, signature=row.signature, example=row.example)


class ReportsForm(forms.Form):
    stream = forms.RegexField(regex=r"^[0-9a-f]{64}$", required=False)  # a stream_hash, for the heat map


@require_GET
def reports(request: HttpRequest) -> HttpResponse:
    params = validated(ReportsForm, request.GET)
    done, latest = report_data.last_runs()
    context = {
        "params": params,
        "last_done": done,
        "latest_run": latest,
        "heatmap": report_data.heatmap(stream_hash=params["stream"] or None),
        "heatmap_streams": report_data.throughput_streams(),
        "hours": range(24),
        "latency": report_data.latency_rows(),
        "signatures": [_signature_link(row) for row in report_data.top_signatures()],
        "retries": report_data.retries_histogram(),
        "anomalies": report_data.anomalies(),
        "lag_charts": report_data.lag_charts(),
        "top_per_stream": report_data.TOP_PER_STREAM,
    }
    return render_screen(request, "streams_app/reports.html", context, partial="heatmap")


@require_POST
def reports_run(request: HttpRequest) -> HttpResponse:
    """Queue a pipeline run (operators; a viewer gets 403 from the action layer) and show its job."""
    try:
        job = services.pipeline_start(user=request.user)
    except OpsError as exc:
        messages.error(request, exc.message)
        return HttpResponseRedirect(reverse("reports"))
    messages.success(request, f"Pipeline run queued as job {job.pk}.")
    return HttpResponseRedirect(links.job_url(job.pk))
