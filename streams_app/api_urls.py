"""The JSON API (SPEC section 4), included by :mod:`streams_app.urls` under ``api/v1/``.

That module registers the ``conn`` and ``seg`` converters before it includes this one. Reads end in a
slash; actions are spelled without one, as SPEC section 4 writes them.
"""

from __future__ import annotations

from django.urls import path

from streams_app.views.api import actions, admin_actions, entries, openapi, read
from streams_app.views.api import export as export_api
from streams_app.views.api import retries as retry_api
from streams_app.views.api import saved_views as saved_view_api
from streams_app.views.api import search as search_api
from streams_app.views.api import search_actions as search_action_api

STREAM = "c/<conn:conn>/streams/<seg:key>/"
GROUP = STREAM + "groups/<seg:group>/"
CONSUMER = GROUP + "consumers/<seg:consumer>/"
DLQ = "c/<conn:conn>/dlq/<seg:key>/"

streams_routes = [
    path("connections/", read.connections, name="api-connections"),
    path("c/<conn:conn>/streams/", read.streams, name="api-streams"),
]

stream_routes = [
    path(STREAM, read.stream, name="api-stream"),
    path(STREAM + "entries/", entries.entries_route, name="api-entries"),  # GET reads, POST adds one
    path(STREAM + "groups/", read.groups, name="api-groups"),
    path(STREAM + "replay", actions.replay, name="api-replay"),
    path(STREAM + "trim", admin_actions.trim, name="api-trim"),
    path(STREAM + "delete", admin_actions.entries_delete, name="api-entries-delete"),
]

group_routes = [
    path(GROUP + "pending/", read.pending, name="api-pending"),
    path(GROUP + "consumers/", read.consumers, name="api-consumers"),
    path(GROUP + "claim", actions.claim, name="api-claim"),
    path(GROUP + "autoclaim", actions.autoclaim, name="api-autoclaim"),
    path(GROUP + "ack", actions.ack, name="api-ack"),
    path(GROUP + "rewind", actions.rewind, name="api-rewind"),
    path(GROUP + "delete", admin_actions.group_delete, name="api-group-delete"),
    path(CONSUMER + "delete", admin_actions.consumer_delete, name="api-consumer-delete"),
]

dlq_routes = [
    path("c/<conn:conn>/dlq/", actions.dlq_list, name="api-dlq-list"),
    path(DLQ, actions.dlq_entries, name="api-dlq"),
    path(DLQ + "requeue", actions.dlq_requeue, name="api-dlq-requeue"),
    path(DLQ + "delete", actions.dlq_delete, name="api-dlq-delete"),
    path(DLQ + "purge", actions.dlq_purge, name="api-dlq-purge"),
]

jobs_routes = [
    path("jobs/", actions.jobs, name="api-jobs"),
    path("jobs/<int:job_id>", actions.job, name="api-job"),
    path("jobs/<int:job_id>/", actions.job),  # the same job with a trailing slash, as clients write it
    path("jobs/<int:job_id>/cancel", actions.job_cancel, name="api-job-cancel"),
    path("jobs/<int:job_id>/resume", actions.job_resume, name="api-job-resume"),
]

audit_routes = [
    path("audit/", actions.audit, name="api-audit"),
]

# The event bus's delayed retries.
retry_routes = [
    path("c/<conn:conn>/retries/", retry_api.retries_list, name="api-retries-list"),
    path(STREAM + "retries/", retry_api.retries_page, name="api-retries"),
    path(STREAM + "retries/retry", retry_api.retry_now, name="api-retries-retry"),
    path(STREAM + "retries/dead-letter", retry_api.retry_dead_letter, name="api-retries-dead-letter"),
    path(STREAM + "retries/delete", retry_api.retry_delete, name="api-retries-delete"),
]

# Payload search.
search_routes = [
    path(STREAM + "search/", search_api.stream_search, name="api-stream-search"),
    path(DLQ + "search/requeue", search_action_api.dlq_requeue_matching_route, name="api-dlq-search-requeue"),
]

# Export of a range: GET streams it, POST starts a background export.
export_routes = [
    path(STREAM + "export", export_api.export_route, name="api-export"),
]

# Saved views: GET lists, POST saves; delete by id.
saved_view_routes = [
    path("views/", saved_view_api.views_route, name="api-views"),
    path("views/<int:view_id>/delete", saved_view_api.view_delete, name="api-view-delete"),
]

# The OpenAPI description of every route here, and its reference page.
meta_routes = [
    path("openapi.json", openapi.openapi_json, name="api-openapi"),
    path("docs/", openapi.docs, name="api-docs"),
]

urlpatterns = [
    *saved_view_routes,
    *streams_routes, *stream_routes, *group_routes, *dlq_routes, *retry_routes, *export_routes, *jobs_routes, *audit_routes, *meta_routes,
    *search_routes,
]
