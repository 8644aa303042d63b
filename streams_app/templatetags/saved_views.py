"""Saved views in the page frame and on the overview: ``{% load saved_views %}``.

``request|saveable_page`` says whether the page being shown can be saved as a view, so the frame's
"Save view" form (``{% save_view_form %}``) appears only where saving works;
``{% saved_views_panel %}`` renders the overview's "Saved views" panel from the user's own views and
the shared ones, newest first and bounded, with a link to ``/views/`` for the rest.
"""

from __future__ import annotations

from typing import Any

from django import template
from django.http import HttpRequest
from django.template.defaulttags import CsrfTokenNode
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from streams_app.saved.models import SavedView
from streams_app.saved.targets import SAVEABLE_PAGES
from streams_app.templatetags.console import asset, nav_url

register = template.Library()

#: Views the overview lists; the rest are on ``/views/``.
OVERVIEW_VIEWS = 20


@register.filter
def saveable_page(request: HttpRequest | None) -> bool:
    match = getattr(request, "resolver_match", None)
    return match is not None and match.url_name in SAVEABLE_PAGES


_SAVE_VIEW = """<div class="page-tools"><details class="save-view" id="save-view">
  <summary title="Save this page, with its filters and position, as a named view">Save view</summary>
  <form method="post" action="{views}" class="save-view-form" data-save-view>
    {csrf}
    <input type="hidden" name="url" value="{url}">
    <label>Name <input type="text" name="name" maxlength="100" required placeholder="e.g. failing payments"></label>
    {shared}
    <span><button type="submit">Save</button> <a href="{views}" class="small">All saved views</a></span>
  </form>
</details></div><script src="{script}" defer></script>"""
_SHARED = '<label class="small"><input type="checkbox" name="shared" value="1"> shared with everyone</label>'


@register.simple_tag(takes_context=True)
def save_view_form(context: template.Context) -> SafeString:
    """"Save view" in the page frame, on the pages that can be saved: a form posting the page's address.
    The hidden field holds the raw path and query as the server received them; static/js/saved-views.js
    replaces it with the browser's address when the form is sent (the tail page moves its position in the
    URL after loading). Built by ``format_html`` (every value escaped) rather than an included template, on
    every page."""
    request = context.get("request")
    if request is None or not saveable_page(request):
        return mark_safe("\n")
    query = request.META.get("QUERY_STRING", "")
    return format_html(
        _SAVE_VIEW + "\n",
        views=nav_url("views"),
        csrf=CsrfTokenNode().render(context),
        url=request.path_info + (f"?{query}" if query else ""),
        shared=mark_safe(_SHARED) if context.get("console_role") in ("operator", "admin") else "",
        script=asset("js/saved-views.js"),
    )


@register.inclusion_tag("streams_app/_saved_views_panel.html", takes_context=True)
def saved_views_panel(context: template.Context) -> dict[str, Any]:
    request = context.get("request")
    user = getattr(request, "user", None)
    rows = list(
        SavedView.objects.visible_to(user).select_related("owner").order_by("-pk")[: OVERVIEW_VIEWS + 1]
    )
    return {"views": rows[:OVERVIEW_VIEWS], "more": len(rows) > OVERVIEW_VIEWS, "user": user}
