"""The JSON API (docs/api.md#addresses), included by :mod:`streams_app.urls` under ``api/v1/``.

That module registers the ``conn`` and ``seg`` converters before it includes this one. Reads end in a
slash; actions are spelled without one, as docs/api.md#addresses writes them, and answer with one too
(:func:`action`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.urls import URLPattern, path

from streams_app.views.api import actions, admin_actions, entries, openapi, read
from streams_app.views.api import annotations as annotation_views  # the name annotations is __future__'s here
from streams_app.views.api import export as export_api
from streams_app.views.api import families as families_api
from streams_app.views.api import journey as journey_api
from streams_app.views.api import retries as retry_api
from streams_app.views.api import saved_views as saved_view_api
from streams_app.views.api import search as search_api
from streams_app.views.api import search_actions as search_action_api
from streams_app.views.api import triage as triage_api

STREAM = "c/<conn:conn>/streams/<seg:key>/"
GROUP = STREAM + "groups/<seg:group>/"
CONSUMER = GROUP + "consumers/<seg:consumer>/"
DLQ = "c/<conn:conn>/dlq/<seg:key>/"


def action(route: str, view: Callable[..., Any], name: str) -> list[URLPattern]:
    """An address spelled without a trailing slash, and the same address with one.

    Clients add the slash, as the reads have it, and Django's APPEND_SLASH cannot help a POST: without
    this twin an action answered 404 at the address next to the right one.
    """
    return [path(route, view, name=name), path(route + "/", view)]


streams_routes = [
    path("connections/", read.connections, name="api-connections"),
    path("c/<conn:conn>/streams/", read.streams, name="api-streams"),
    path("c/<conn:conn>/families/", families_api.families, name="api-families"),
    path("c/<conn:conn>/families/<seg:family>/", families_api.family_members, name="api-family"),
]

stream_routes = [
    path(STREAM, read.stream, name="api-stream"),
    path(STREAM + "entries/", entries.entries_route, name="api-entries"),  # GET reads, POST adds one
    path(STREAM + "groups/", read.groups, name="api-groups"),
    *action(STREAM + "replay", actions.replay, "api-replay"),
    *action(STREAM + "trim", admin_actions.trim, "api-trim"),
    *action(STREAM + "delete", admin_actions.entries_delete, "api-entries-delete"),
]

group_routes = [
    path(GROUP + "pending/", read.pending, name="api-pending"),
    path(GROUP + "consumers/", read.consumers, name="api-consumers"),
    *action(GROUP + "claim", actions.claim, "api-claim"),
    *action(GROUP + "autoclaim", actions.autoclaim, "api-autoclaim"),
    *action(GROUP + "ack", actions.ack, "api-ack"),
    *action(GROUP + "rewind", actions.rewind, "api-rewind"),
    *action(GROUP + "delete", admin_actions.group_delete, "api-group-delete"),
    *action(CONSUMER + "delete", admin_actions.consumer_delete, "api-consumer-delete"),
]

dlq_routes = [
    path("c/<conn:conn>/dlq/", actions.dlq_list, name="api-dlq-list"),
    path(DLQ, actions.dlq_entries, name="api-dlq"),
    *action(DLQ + "requeue", actions.dlq_requeue, "api-dlq-requeue"),
    path(DLQ + "triage/", triage_api.dlq_triage_route, name="api-dlq-triage"),
    *action(DLQ + "triage/requeue", triage_api.dlq_requeue_filtered_route, "api-dlq-triage-requeue"),
    *action(DLQ + "delete", actions.dlq_delete, "api-dlq-delete"),
    *action(DLQ + "purge", actions.dlq_purge, "api-dlq-purge"),
]

jobs_routes = [
    path("jobs/", actions.jobs, name="api-jobs"),
    *action("jobs/<int:job_id>", actions.job, "api-job"),
    *action("jobs/<int:job_id>/cancel", actions.job_cancel, "api-job-cancel"),
    *action("jobs/<int:job_id>/resume", actions.job_resume, "api-job-resume"),
]

audit_routes = [
    path("audit/", actions.audit, name="api-audit"),
]

# The event bus's delayed retries.
retry_routes = [
    path("c/<conn:conn>/retries/", retry_api.retries_list, name="api-retries-list"),
    path(STREAM + "retries/", retry_api.retries_page, name="api-retries"),
    *action(STREAM + "retries/retry", retry_api.retry_now, "api-retries-retry"),
    *action(STREAM + "retries/dead-letter", retry_api.retry_dead_letter, "api-retries-dead-letter"),
    *action(STREAM + "retries/delete", retry_api.retry_delete, "api-retries-delete"),
]

# Payload search.
search_routes = [
    path(STREAM + "search/", search_api.stream_search, name="api-stream-search"),
    *action(DLQ + "search/requeue", search_action_api.dlq_requeue_matching_route, "api-dlq-search-requeue"),
]

# Export of a range: GET streams it, POST starts a background export.
export_routes = [
    *action(STREAM + "export", export_api.export_route, "api-export"),
]

# Saved views: GET lists, POST saves; delete by id.
saved_view_routes = [
    path("views/", saved_view_api.views_route, name="api-views"),
    *action("views/<int:view_id>/delete", saved_view_api.view_delete, "api-view-delete"),
]

# Annotations (deploy markers, notes) on the charts and the incident timeline: GET lists, POST writes.
annotation_routes = [
    *action("annotations", annotation_views.annotations_route, "api-annotations"),
]

# The journey of one event: what the journey page shows, as JSON.
journey_routes = [
    path("c/<conn:conn>/journey/", journey_api.journey, name="api-journey"),
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
    *journey_routes,
    *annotation_routes,
]
