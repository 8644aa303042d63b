"""Saved views in the page frame and on the overview: ``{% load saved_views %}``.

``request|saveable_page`` says whether the page being shown can be saved as a view, so the frame's
"Save view" form (``streams_app/_save_view.html``) appears only where saving works;
``{% saved_views_panel %}`` renders the overview's "Saved views" panel from the user's own views and
the shared ones, newest first and bounded, with a link to ``/views/`` for the rest.
"""

from __future__ import annotations

from typing import Any

from django import template
from django.http import HttpRequest

from streams_app.saved.models import SavedView
from streams_app.saved.targets import SAVEABLE_PAGES

register = template.Library()

#: Views the overview lists; the rest are on ``/views/``.
OVERVIEW_VIEWS = 20


@register.filter
def saveable_page(request: HttpRequest | None) -> bool:
    match = getattr(request, "resolver_match", None)
    return match is not None and match.url_name in SAVEABLE_PAGES


@register.inclusion_tag("streams_app/_saved_views_panel.html", takes_context=True)
def saved_views_panel(context: template.Context) -> dict[str, Any]:
    request = context.get("request")
    user = getattr(request, "user", None)
    rows = list(
        SavedView.objects.visible_to(user).select_related("owner").order_by("-pk")[: OVERVIEW_VIEWS + 1]
    )
    return {"views": rows[:OVERVIEW_VIEWS], "more": len(rows) > OVERVIEW_VIEWS, "user": user}
