"""The audit log: every action anyone attempted, newest first, filtered and paged by an id cursor."""

from __future__ import annotations

import json

from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from streams_app.audit.models import AuditEvent
from streams_app.views.action_forms import AuditFiltersForm
from streams_app.views.common import render_screen
from streams_app.views.forms import validated


def audit_events(params: dict) -> tuple[list[AuditEvent], int | None]:
    """One page of events for the validated filters, and the cursor of the next (older) page.

    Keyset paging on the primary key (``before``): cheap at any depth of a long trail, and stable
    while new events arrive at the top.
    """
    rows: QuerySet[AuditEvent] = AuditEvent.objects.order_by("-pk")
    if params.get("action"):
        rows = rows.filter(action__startswith=params["action"])
    if params.get("user"):
        rows = rows.filter(username=params["user"])
    if params.get("connection"):
        rows = rows.filter(connection=params["connection"])
    if params.get("outcome"):
        rows = rows.filter(outcome=params["outcome"])
    if params.get("since"):
        rows = rows.filter(at__gte=params["since"])
    if params.get("before"):
        rows = rows.filter(pk__lt=params["before"])
    count = params.get("count") or 50
    page = list(rows[: count + 1])
    more = len(page) > count
    page = page[:count]
    return page, page[-1].pk if more else None


def audit_json(event: AuditEvent) -> dict:
    return {
        "id": event.pk,
        "at": event.at.isoformat(),
        "user": event.username,
        "connection": event.connection,
        "action": event.action,
        "stream": event.target_display or None,
        "group": event.target_group or None,
        "ids": event.target_ids,
        "parameters": event.parameters,
        "outcome": event.outcome,
        "error": event.error or None,
        "affected": event.affected,
        "duration_ms": event.duration_ms,
    }


@require_GET
def audit_list(request: HttpRequest) -> HttpResponse:
    params = validated(AuditFiltersForm, request.GET)
    events, older = audit_events(params)
    context = {
        "rows": [(e, json.dumps(e.parameters, ensure_ascii=False, sort_keys=True)) for e in events],
        "outcomes": ["", *AuditEvent.Outcome.values],
        "older": older,
        "params": params,
        "actions": list(AuditEvent.objects.order_by("action").values_list("action", flat=True).distinct()[:200]),
    }
    return render_screen(request, "streams_app/audit.html", context, partial="rows")
