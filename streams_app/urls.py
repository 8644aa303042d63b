"""Console pages, listed by screen; the JSON API lives in :mod:`streams_app.api_urls` under ``api/v1/``.

``<seg:key>``, ``<seg:group>`` and ``<seg:consumer>`` are byte strings carried as one percent-encoded
path segment; build their URLs with :mod:`streams_app.views.links`, not ``reverse()``. The converters
are registered here, before the API routes are included, because a route is parsed when it is built.
Action routes (claim, trim, ...) sit with the page that offers the button; each is a POST, most behind
a GET confirm page (``.../preview/``).
"""

from __future__ import annotations

from django.urls import include, path, register_converter

from streams_app.views import (
    actions,
    admin_actions,
    alerts,
    audit,
    charts,
    confirm,
    dlq,
    dlq_entry,
    dlq_triage,
    entry_add,
    families,
    group,
    handlers,
    jobs,
    metrics,
    overview,
    progress,
    reports,
    stream,
    streams,
    timeline,
    tokens,
)
from streams_app.views import export as export_views
from streams_app.views import journey as journey_views
from streams_app.views import retries as retry_views
from streams_app.views import saved_views as saved_view_pages
from streams_app.views import search as search_views
from streams_app.views import search_actions as search_action_views
from streams_app.views.links import BytesSegmentConverter, ConnConverter, EntryIdConverter
from streams_app.views.tail import tail

register_converter(BytesSegmentConverter, "seg")
register_converter(ConnConverter, "conn")
register_converter(EntryIdConverter, "eid")

STREAM = "c/<conn:conn>/streams/<seg:key>/"
ENTRY = STREAM + "entries/<eid:entry_id>/"
GROUP = STREAM + "groups/<seg:group>/"
CONSUMER = GROUP + "consumers/<seg:consumer>/"
DLQ = "c/<conn:conn>/dlq/<seg:key>/"

overview_routes = [
    path("", overview.overview, name="overview"),
    path("charts/overview/", charts.overview_charts, name="charts-overview"),
]

streams_routes = [
    path("c/<conn:conn>/streams/", streams.streams_list, name="streams"),
]

# Stream families: a row per family, and a family's members (its glob as one path segment).
family_routes = [
    path("c/<conn:conn>/families/", families.families_list, name="families"),
    path("c/<conn:conn>/families/<seg:family>/", families.family_members, name="family"),
]

stream_routes = [
    path(STREAM, stream.stream_detail, name="stream"),
    path(STREAM + "charts/", charts.stream_charts, name="stream-charts"),
    path(STREAM + "handlers/", handlers.stream_handlers, name="stream-handlers"),
    path(STREAM + "replay/count/", actions.replay_count, name="replay-count"),
    path(STREAM + "replay/", actions.replay, name="replay"),
    path(STREAM + "trim/preview/", admin_actions.trim_preview, name="trim-preview"),
    path(STREAM + "trim/", admin_actions.trim, name="trim"),
    path(STREAM + "delete/preview/", admin_actions.entries_delete_preview, name="entries-delete-preview"),
    path(STREAM + "delete/", admin_actions.entries_delete, name="entries-delete"),
]

entry_routes = [
    path(ENTRY, stream.entry_detail, name="entry"),
    path(ENTRY + "raw/", stream.entry_raw, name="entry-raw"),
]

group_routes = [
    path(GROUP, group.group_detail, name="group"),
    path(GROUP + "charts/", charts.group_charts, name="group-charts"),
    path(GROUP + "handlers/", handlers.group_handlers, name="group-handlers"),
    path(GROUP + "claim/", actions.claim, name="claim"),
    path(GROUP + "autoclaim/", actions.autoclaim, name="autoclaim"),
    path(GROUP + "autoclaim/confirm/", confirm.autoclaim_confirm, name="autoclaim-confirm"),
    path(GROUP + "ack/", actions.ack, name="ack"),
    path(GROUP + "rewind/preview/", actions.rewind_preview, name="rewind-preview"),
    path(GROUP + "rewind/", actions.rewind, name="rewind"),
    path(GROUP + "delete/", admin_actions.group_delete, name="group-delete"),
    path(CONSUMER + "delete/preview/", admin_actions.consumer_delete_preview, name="consumer-delete-preview"),
    path(CONSUMER + "delete/", admin_actions.consumer_delete, name="consumer-delete"),
]

dlq_routes = [
    path("c/<conn:conn>/dlq/", dlq.dlq_list, name="dlq-list"),
    path(DLQ, dlq.dlq_detail, name="dlq"),
    path(DLQ + "charts/", charts.dlq_charts, name="dlq-charts"),
    path(DLQ + "requeue/", actions.dlq_requeue, name="dlq-requeue"),
    path(DLQ + "requeue/confirm/", confirm.dlq_requeue_all_confirm, name="dlq-requeue-confirm"),
    path(DLQ + "delete/", actions.dlq_delete, name="dlq-delete"),
    path(DLQ + "purge/", actions.dlq_purge, name="dlq-purge"),
    # a triage count's "requeue these": its confirm page (GET), and the job's start (POST)
    path(DLQ + "triage/requeue/confirm/", dlq_triage.requeue_filtered_confirm, name="dlq-triage-requeue-confirm"),
    path(DLQ + "triage/requeue/", dlq_triage.requeue_filtered_start, name="dlq-triage-requeue"),
]

# A dead letter's own page and adding an entry by hand.
dead_letter_routes = [
    path(DLQ + "entries/<eid:entry_id>/", dlq_entry.dlq_entry_detail, name="dlq-entry"),
]
entry_add_routes = [
    path(STREAM + "add/", entry_add.entry_add, name="entry-add"),
]

# Export of a range, streamed or as a background job, and a finished job's file.
export_routes = [
    path(STREAM + "export/", export_views.stream_export, name="export"),
    path(STREAM + "export/job/", export_views.stream_export_job, name="export-job"),
    path("jobs/<int:job_id>/download/", export_views.export_download, name="export-download"),
]

# The event bus's delayed retries: a connection's retry sets, one stream's schedule.
retry_routes = [
    path("c/<conn:conn>/retries/", retry_views.retries_list, name="retries-list"),
    path(STREAM + "retries/", retry_views.retries_page, name="retries"),
    path(STREAM + "retries/retry/", retry_views.retry_now, name="retries-retry"),
    path(STREAM + "retries/dead-letter/", retry_views.retry_dead_letter, name="retries-dead-letter"),
    path(STREAM + "retries/delete/", retry_views.retry_delete, name="retries-delete"),
    path(STREAM + "retries/all/preview/", retry_views.retry_all_preview, name="retries-all-preview"),
]

# Live views of a stream: the websocket tail page and a progress stream as Server-Sent Events.
live_routes = [
    path(STREAM + "tail/", tail, name="tail"),
    path("c/<conn:conn>/progress/<seg:key>/events/", progress.progress_events, name="progress-events"),
]

jobs_routes = [
    path("jobs/", jobs.jobs_list, name="jobs"),
    path("jobs/<int:job_id>/", jobs.job_detail, name="job"),
    path("jobs/<int:job_id>/cancel/", jobs.job_cancel, name="job-cancel"),
    path("jobs/<int:job_id>/resume/", jobs.job_resume, name="job-resume"),
]

audit_routes = [
    path("audit/", audit.audit_list, name="audit"),
]

alerts_routes = [
    path("alerts/", alerts.alerts_list, name="alerts"),
    path("alerts/rules/new/", alerts.alert_rule_new, name="alert-rule-new"),
    path("alerts/rules/<int:rule_id>/", alerts.alert_rule_edit, name="alert-rule-edit"),
    path("alerts/rules/<int:rule_id>/delete/", alerts.alert_rule_delete, name="alert-rule-delete"),
]

reports_routes = [
    path("reports/", reports.reports, name="reports"),
    path("reports/run/", reports.reports_run, name="reports-run"),
]

tokens_routes = [
    path("tokens/", tokens.tokens, name="tokens"),
    path("tokens/<int:token_id>/revoke/", tokens.token_revoke, name="token-revoke"),
]

# Saved views: the list, saving (POST from every page's frame), rename, delete.
saved_view_routes = [
    path("views/", saved_view_pages.views_list, name="views"),
    path("views/<int:view_id>/rename/", saved_view_pages.view_rename, name="view-rename"),
    path("views/<int:view_id>/delete/", saved_view_pages.view_delete, name="view-delete"),
]

# Payload search on the stream and DLQ pages: one step of a run per request.
search_routes = [
    path(STREAM + "search/", search_views.stream_search, name="stream-search"),
    path(DLQ + "search/", search_views.dlq_search, name="dlq-search"),
    path(DLQ + "search/requeue/confirm/", search_action_views.dlq_requeue_matching_confirm, name="dlq-search-requeue-confirm"),
    path(DLQ + "search/requeue/", search_action_views.dlq_requeue_matching_start, name="dlq-search-requeue"),
    path(STREAM + "search/replay/confirm/", search_action_views.stream_replay_matching_confirm, name="stream-search-replay-confirm"),
    path(STREAM + "search/replay/", search_action_views.stream_replay_matching_start, name="stream-search-replay"),
    path(GROUP + "search/ack/confirm/", search_action_views.group_ack_matching_confirm, name="group-search-ack-confirm"),
    path(GROUP + "search/ack/", search_action_views.group_ack_matching_start, name="group-search-ack"),
]

# The journey of one event: every place it has been, from an entry ID, an event id or a query.
journey_routes = [
    path("c/<conn:conn>/journey/", journey_views.journey_page, name="journey"),
]

# The incident timeline of a connection and of a stream, and its "add an annotation" form.
timeline_routes = [
    path("c/<conn:conn>/timeline/", timeline.connection_timeline, name="timeline"),
    path("c/<conn:conn>/timeline/annotate/", timeline.connection_annotate, name="timeline-annotate"),
    path(STREAM + "timeline/", timeline.stream_timeline, name="stream-timeline"),
    path(STREAM + "timeline/annotate/", timeline.stream_annotate, name="stream-timeline-annotate"),
]

# Prometheus scrape endpoint: a bearer token, no session, no page.
metrics_routes = [
    path("metrics", metrics.metrics, name="metrics"),
]

urlpatterns = [
    *overview_routes,
    *streams_routes,
    *family_routes,
    *stream_routes,
    *entry_routes,
    *group_routes,
    *dlq_routes,
    *dead_letter_routes,
    *entry_add_routes,
    *export_routes,
    *retry_routes,
    *live_routes,
    *jobs_routes,
    *audit_routes,
    *alerts_routes,
    *reports_routes,
    *tokens_routes,
    *saved_view_routes,
    *metrics_routes,
    *search_routes,
    *journey_routes,
    *timeline_routes,
    path("api/v1/", include("streams_app.api_urls")),
]
