"""Saved views: the ``/views/`` page, and the "Save this view" form every page carries.

A view is a console page's URL with its query string, under a name (:mod:`streams_app.saved`). The
form in the page frame (``templates/base.html``) posts the page's own address here; the browser's
address is used (``static/js/saved-views.js`` copies ``location`` into the form when it is sent),
because pages such as the tail move their position in the URL after loading, and because the
server's ``request.get_full_path()`` is built from the decoded path, which loses a binary key's
bytes. Opening a view is following its link: it lands on the very page and query that were saved.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from streams_app import services
from streams_app.accounts.roles import Role, role_of
from streams_app.saved.models import NAME_MAX, SavedView
from streams_app.views.common import render_screen
from streams_app.views.forms import validated
from streams_app.views.paging import newest_first

#: Views per page of ``/views/``.
PAGE = 100


class ViewsPageForm(forms.Form):
    """The list's filter (``mine``: only my views) and its "older than" cursor."""

    mine = forms.BooleanField(required=False)
    before = forms.IntegerField(required=False, min_value=1)


def _checked(request: HttpRequest, name: str) -> bool:
    """An HTML checkbox: present means yes."""
    return request.POST.get(name, "") not in ("", "0", "false", "off")


@require_http_methods(["GET", "POST"])
def views_list(request: HttpRequest) -> HttpResponse:
    """GET: my views and the shared ones, newest first. POST: save a view (the frame's form)."""
    if request.method == "POST":
        return _save(request)
    params = validated(ViewsPageForm, request.GET)
    rows = SavedView.objects.visible_to(request.user).select_related("owner")
    if params["mine"]:
        rows = rows.filter(owner_id=request.user.pk)
    page = newest_first(rows, before=params["before"], size=PAGE)
    context = {
        "views": [(view, services.saved_view_may_delete(user=request.user, view=view)) for view in page.rows],
        "older": page.older,
        "params": params,
        "name_max": NAME_MAX,
        "can_share": role_of(request.user) >= Role.OPERATOR,
    }
    return render_screen(request, "streams_app/saved_views.html", context)


def _save(request: HttpRequest) -> HttpResponse:
    """Save the posted page as a view, then go back to it (a refused URL is a 400 page, audited)."""
    view = services.saved_view_save(
        user=request.user,
        name=request.POST.get("name", ""),
        url=request.POST.get("url", ""),
        shared=_checked(request, "shared"),
    )
    who = "everyone" if view.shared else "you only"
    messages.success(
        request, f"Saved the view “{view.name}” (visible to {who}); it is listed on the overview."
    )
    return HttpResponseRedirect(view.url)


@require_POST
def view_rename(request: HttpRequest, view_id: int) -> HttpResponse:
    """Rename one of my views."""
    view = services.saved_view_rename(user=request.user, view_id=view_id, name=request.POST.get("name", ""))
    messages.success(request, f"Renamed the view to “{view.name}”.")
    return HttpResponseRedirect(reverse("views"))


@require_POST
def view_delete(request: HttpRequest, view_id: int) -> HttpResponse:
    """Delete one of my views, or (admins) a shared one."""
    view = services.saved_view_delete(user=request.user, view_id=view_id)
    messages.success(request, f"Deleted the view “{view.name}”.")
    return HttpResponseRedirect(reverse("views"))
