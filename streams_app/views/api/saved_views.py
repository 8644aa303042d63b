"""Saved views over the JSON API: list, save, delete.

``GET /api/v1/views/`` lists the caller's views and the shared ones, newest first;
``POST /api/v1/views/`` saves ``{name, url, shared}``; ``POST /api/v1/views/<id>/delete`` deletes one.
The rules are the pages' (:mod:`streams_app.services.saved_views`): ``url`` must be a page of this
console (a path, never an external URL: 400), sharing needs the operator role (403), and each attempt
leaves one audit row.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse
from pydantic import ConfigDict, StrictBool

from streams_app import services
from streams_app.saved.models import NAME_MAX, PATH_MAX, QUERY_MAX, SavedView
from streams_app.views.api.endpoint import api_endpoint, api_methods, flag, read_json
from streams_app.views.api.replies import Reply, example
from streams_app.views.api.schemas import I64_MAX, Body, Query, parse, query, query_int, text
from streams_app.views.paging import newest_first

_EXAMPLE_URL = "/c/default/dlq/orders%3Adlq/?error=timeout"


class SavedViewBody(Body):
    """Save a console page as a named view. ``url`` is the page's path with its query string, as the
    browser shows it (``/c/default/streams/orders/?order=asc``): an absolute or external URL is refused.
    ``shared`` makes it visible to every user and needs the operator role."""

    name: text(min_length=1, max_length=NAME_MAX)  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    url: text(min_length=1, max_length=PATH_MAX + QUERY_MAX + 1)  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    shared: StrictBool = False

    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        frozen=True,
        json_schema_extra={"examples": [{"name": "timeouts in orders", "url": _EXAMPLE_URL, "shared": True}]},
    )


class SavedViewsQuery(Query):
    """``mine=true`` lists only the caller's own views; ``before`` is the "older than" cursor (an id)."""

    mine: bool = False
    before: query_int(ge=1, le=I64_MAX) | None = None  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    count: query_int(ge=1, le=500) = 100  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type


class SavedViewRow(Reply):
    """One view: ``url`` opens it (the same page and query that were saved)."""

    id: int
    name: str
    url: str
    path: str
    query: str
    shared: bool
    owner: str
    mine: bool
    created_at: str
    updated_at: str

    model_config = example(
        {
            "id": 7,
            "name": "timeouts in orders",
            "url": _EXAMPLE_URL,
            "path": "/c/default/dlq/orders%3Adlq/",
            "query": "error=timeout",
            "shared": True,
            "owner": "ada",
            "mine": True,
            "created_at": "2026-11-22T10:30:00+00:00",
            "updated_at": "2026-11-22T10:30:00+00:00",
        }
    )


class SavedViewsReply(Reply):
    views: list[SavedViewRow]
    next: int | None


class SavedViewDeleted(Reply):
    id: int
    deleted: bool


def view_json(view: SavedView, *, user_pk: Any) -> dict[str, Any]:
    return {
        "id": view.pk,
        "name": view.name,
        "url": view.url,
        "path": view.path,
        "query": view.query,
        "shared": view.shared,
        "owner": view.owner.get_username(),
        "mine": view.owner_id == user_pk,
        "created_at": view.created_at.isoformat(),
        "updated_at": view.updated_at.isoformat(),
    }


@api_endpoint(
    method="GET",
    summary="Saved views: mine and the shared ones",
    tag="views",
    query=SavedViewsQuery,
    replies={200: SavedViewsReply},
)
def views_list(request: HttpRequest) -> JsonResponse:
    """Newest first; another user's private views are never listed."""
    params = query(SavedViewsQuery, request.GET)
    rows = SavedView.objects.visible_to(request.user).select_related("owner")
    if params.mine:
        rows = rows.filter(owner_id=request.user.pk)
    page = newest_first(rows, before=params.before, size=params.count)
    return JsonResponse(
        {"views": [view_json(v, user_pk=request.user.pk) for v in page.rows], "next": page.older}
    )


@api_endpoint(
    method="POST", summary="Save a view", tag="views", body=SavedViewBody, action=("view.save", "view.share"),
    replies={201: SavedViewRow},
)
def view_save(request: HttpRequest) -> JsonResponse:
    """Any user may save a private view; ``shared: true`` needs the operator role."""
    body = read_json(request)
    action = services.saved_view_action(shared=flag(body, "shared"))
    data = services.action_input(
        user=request.user, conn="", action=action, validate=lambda: parse(SavedViewBody, body)
    )
    view = services.saved_view_save(user=request.user, name=data.name, url=data.url, shared=data.shared)
    return JsonResponse(view_json(view, user_pk=request.user.pk), status=201)


@api_endpoint(
    method="POST", summary="Delete a saved view", tag="views", action="view.delete", replies={200: SavedViewDeleted},
    errors=(404,),
)
def view_delete(request: HttpRequest, view_id: int) -> JsonResponse:
    """The owner deletes a view, an admin any shared one (403 otherwise); another user's private view is a 404."""
    services.saved_view_delete(user=request.user, view_id=view_id)
    return JsonResponse({"id": view_id, "deleted": True})


#: ``/api/v1/views/``: GET lists, POST saves.
views_route = api_methods(views_list, view_save)
