"""Console pages and the JSON API (SPEC section 4).

``<seg:key>`` and ``<seg:group>`` are byte strings carried as one percent-encoded path segment;
build their URLs with :mod:`streams_app.views.links`, not ``reverse()``.
"""

from __future__ import annotations

from django.urls import path, register_converter

from streams_app.views import actions as action_views  # operations (issue 4)
from streams_app.views import admin_actions as admin_views  # admin actions
from streams_app.views import alerts as alert_views  # alerts & charts (issue 6)
from streams_app.views import (  # audit, dlq, jobs: issue 4
    audit,
    dlq,
    group,
    jobs,
    overview,
    progress,
    stream,
    streams,
)
from streams_app.views import charts as chart_views  # alerts & charts (issue 6)
from streams_app.views import handlers as handler_views  # alerts & charts (issue 6)
from streams_app.views import metrics as metrics_views  # metrics (issue 6)
from streams_app.views import reports as report_views  # reports (issue 7)
from streams_app.views import tokens as token_views  # personal API tokens page
from streams_app.views.api import actions as api_actions  # operations (issue 4)
from streams_app.views.api import admin_actions as api_admin  # admin actions
from streams_app.views.api import read as api_read
from streams_app.views.links import BytesSegmentConverter, ConnConverter
from streams_app.views.tail import tail as tail_view

register_converter(BytesSegmentConverter, "seg")
register_converter(ConnConverter, "conn")


class EntryIdConverter:
    regex = r"[0-9]{1,20}-[0-9]{1,20}"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(EntryIdConverter, "eid")

STREAM = "c/<conn:conn>/streams/<seg:key>/"
API_STREAM = "api/v1/" + STREAM
DLQ = "c/<conn:conn>/dlq/<seg:key>/"  # operations (issue 4)
API_DLQ = "api/v1/" + DLQ  # operations (issue 4)
CONSUMER = STREAM + "groups/<seg:group>/consumers/<seg:consumer>/"  # admin actions

urlpatterns = [
    path("", overview.overview, name="overview"),
    path("c/<conn:conn>/streams/", streams.streams_list, name="streams"),
    path(STREAM, stream.stream_detail, name="stream"),
    path(STREAM + "entries/<eid:entry_id>/", stream.entry_detail, name="entry"),
    path(STREAM + "entries/<eid:entry_id>/raw/", stream.entry_raw, name="entry-raw"),
    path(STREAM + "groups/<seg:group>/", group.group_detail, name="group"),
    path(STREAM + "tail/", tail_view, name="tail"),
    path("c/<conn:conn>/progress/<seg:key>/events/", progress.progress_events, name="progress-events"),
    # JSON API
    path("api/v1/connections/", api_read.connections, name="api-connections"),
    path("api/v1/c/<conn:conn>/streams/", api_read.streams, name="api-streams"),
    path(API_STREAM, api_read.stream, name="api-stream"),
    path(API_STREAM + "entries/", api_read.entries, name="api-entries"),
    path(API_STREAM + "groups/", api_read.groups, name="api-groups"),
    path(API_STREAM + "groups/<seg:group>/pending/", api_read.pending, name="api-pending"),
    path(API_STREAM + "groups/<seg:group>/consumers/", api_read.consumers, name="api-consumers"),
    # operations (issue 4): HTML buttons, DLQ pages, jobs, audit
    path(STREAM + "groups/<seg:group>/claim/", action_views.claim, name="claim"),
    path(STREAM + "groups/<seg:group>/autoclaim/", action_views.autoclaim, name="autoclaim"),
    path(STREAM + "groups/<seg:group>/ack/", action_views.ack, name="ack"),
    path(STREAM + "groups/<seg:group>/rewind/preview/", action_views.rewind_preview, name="rewind-preview"),
    path(STREAM + "groups/<seg:group>/rewind/", action_views.rewind, name="rewind"),
    path(STREAM + "replay/count/", action_views.replay_count, name="replay-count"),
    path(STREAM + "replay/", action_views.replay, name="replay"),
    path("c/<conn:conn>/dlq/", dlq.dlq_list, name="dlq-list"),
    path(DLQ, dlq.dlq_detail, name="dlq"),
    path(DLQ + "requeue/", action_views.dlq_requeue, name="dlq-requeue"),
    path(DLQ + "delete/", action_views.dlq_delete, name="dlq-delete"),
    path(DLQ + "purge/", action_views.dlq_purge, name="dlq-purge"),
    path("jobs/", jobs.jobs_list, name="jobs"),
    path("jobs/<int:job_id>/", jobs.job_detail, name="job"),
    path("jobs/<int:job_id>/cancel/", jobs.job_cancel, name="job-cancel"),
    path("jobs/<int:job_id>/resume/", jobs.job_resume, name="job-resume"),
    path("audit/", audit.audit_list, name="audit"),
    # operations (issue 4): JSON API (SPEC section 4 spells these without a trailing slash)
    path(API_STREAM + "groups/<seg:group>/claim", api_actions.claim, name="api-claim"),
    path(API_STREAM + "groups/<seg:group>/autoclaim", api_actions.autoclaim, name="api-autoclaim"),
    path(API_STREAM + "groups/<seg:group>/ack", api_actions.ack, name="api-ack"),
    path(API_STREAM + "groups/<seg:group>/rewind", api_actions.rewind, name="api-rewind"),
    path(API_STREAM + "replay", api_actions.replay, name="api-replay"),
    path("api/v1/c/<conn:conn>/dlq/", api_actions.dlq_list, name="api-dlq-list"),
    path(API_DLQ, api_actions.dlq_entries, name="api-dlq"),
    path(API_DLQ + "requeue", api_actions.dlq_requeue, name="api-dlq-requeue"),
    path(API_DLQ + "delete", api_actions.dlq_delete, name="api-dlq-delete"),
    path(API_DLQ + "purge", api_actions.dlq_purge, name="api-dlq-purge"),
    path("api/v1/jobs/", api_actions.jobs, name="api-jobs"),
    path("api/v1/jobs/<int:job_id>", api_actions.job, name="api-job"),
    path("api/v1/jobs/<int:job_id>/", api_actions.job),
    path("api/v1/jobs/<int:job_id>/cancel", api_actions.job_cancel, name="api-job-cancel"),
    path("api/v1/jobs/<int:job_id>/resume", api_actions.job_resume, name="api-job-resume"),
    path("api/v1/audit/", api_actions.audit, name="api-audit"),
    # metrics (issue 6): Prometheus scrape endpoint, bearer token only
    path("metrics", metrics_views.metrics, name="metrics"),
    # alerts & charts (issue 6)
    path("alerts/", alert_views.alerts_list, name="alerts"),
    path("alerts/rules/new/", alert_views.alert_rule_new, name="alert-rule-new"),
    path("alerts/rules/<int:rule_id>/", alert_views.alert_rule_edit, name="alert-rule-edit"),
    path("alerts/rules/<int:rule_id>/delete/", alert_views.alert_rule_delete, name="alert-rule-delete"),
    path("charts/overview/", chart_views.overview_charts, name="charts-overview"),
    path(STREAM + "charts/", chart_views.stream_charts, name="stream-charts"),
    path(STREAM + "groups/<seg:group>/charts/", chart_views.group_charts, name="group-charts"),
    path(DLQ + "charts/", chart_views.dlq_charts, name="dlq-charts"),
    path(STREAM + "handlers/", handler_views.stream_handlers, name="stream-handlers"),
    path(STREAM + "groups/<seg:group>/handlers/", handler_views.group_handlers, name="group-handlers"),
    # reports (issue 7): the data pipeline's rollups, and "Run pipeline now"
    path("reports/", report_views.reports, name="reports"),
    path("reports/run/", report_views.reports_run, name="reports-run"),
    # admin actions: delete a consumer or a group, trim, delete entries (confirm pages, then POST)
    path(CONSUMER + "delete/preview/", admin_views.consumer_delete_preview, name="consumer-delete-preview"),
    path(CONSUMER + "delete/", admin_views.consumer_delete, name="consumer-delete"),
    path(STREAM + "groups/<seg:group>/delete/", admin_views.group_delete, name="group-delete"),
    path(STREAM + "trim/preview/", admin_views.trim_preview, name="trim-preview"),
    path(STREAM + "trim/", admin_views.trim, name="trim"),
    path(STREAM + "delete/preview/", admin_views.entries_delete_preview, name="entries-delete-preview"),
    path(STREAM + "delete/", admin_views.entries_delete, name="entries-delete"),
    path("api/v1/" + CONSUMER + "delete", api_admin.consumer_delete, name="api-consumer-delete"),
    path(API_STREAM + "groups/<seg:group>/delete", api_admin.group_delete, name="api-group-delete"),
    path(API_STREAM + "trim", api_admin.trim, name="api-trim"),
    path(API_STREAM + "delete", api_admin.entries_delete, name="api-entries-delete"),
    # personal API tokens page
    path("tokens/", token_views.tokens, name="tokens"),
    path("tokens/<int:token_id>/revoke/", token_views.token_revoke, name="token-revoke"),
]
