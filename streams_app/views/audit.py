"""The audit log: every action anyone attempted, newest first, filtered and paged by an id cursor."""

from __future__ import annotations

import json

from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from streams_app.audit.models import AuditEvent
from streams_app.redis_ops.ids import bound_text
from streams_app.views.action_forms import AuditFiltersForm
from streams_app.views.common import render_screen
from streams_app.views.forms import validated
from streams_app.views.paging import Page, newest_first


def audit_events(params: dict) -> Page[AuditEvent]:
    """One page of events for the validated filters, and the cursor of the next (older) page.

    Paged by :func:`~streams_app.views.paging.newest_first` on the primary key (``before``).
    """
    rows: QuerySet[AuditEvent] = AuditEvent.objects.all()
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
    return newest_first(rows, before=params.get("before"), size=params.get("count") or 50)


def audit_json(event: AuditEvent) -> dict:
    return {
        "id": event.pk,
        "at": event.at.isoformat(),
        "user": event.username,
        "oidc_issuer": event.oidc_issuer or None,  # who the user is at their OpenID provider, if they signed in there
        "oidc_subject": event.oidc_subject or None,
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


#: Parameters that are a range's bounds, shown as times (the exact IDs stay in the row and on hover):
#: replay's and export's, as asked and as resolved, and a trim's MINID.
BOUNDS = {"start": "start", "end": "end", "start_id": "start", "end_id": "end", "from": "start", "to": "end",
          "minid": "start"}  # fmt: skip


def parameters_text(parameters: object) -> str:
    """An event's parameters as the page shows them: JSON, with a range's bounds read as times
    ("to the end of 2026-11-29 12:30:00.000 UTC", :func:`streams_app.redis_ops.ids.bound_text`)."""
    if isinstance(parameters, dict):
        parameters = {
            name: bound_text(value, side=BOUNDS[name]) if name in BOUNDS and isinstance(value, str) else value
            for name, value in parameters.items()
        }
    return json.dumps(parameters, ensure_ascii=False, sort_keys=True)


@require_GET
def audit_list(request: HttpRequest) -> HttpResponse:
    params = validated(AuditFiltersForm, request.GET)
    events, older = audit_events(params)
    context = {
        "rows": [
            (e, parameters_text(e.parameters), json.dumps(e.parameters, ensure_ascii=False, sort_keys=True))
            for e in events
        ],
        "outcomes": ["", *AuditEvent.Outcome.values],
        "older": older,
        "params": params,
        "actions": list(AuditEvent.objects.order_by("action").values_list("action", flat=True).distinct()[:200]),
    }
    return render_screen(request, "streams_app/audit.html", context, partial="rows")
