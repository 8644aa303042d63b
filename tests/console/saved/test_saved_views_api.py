"""Saved views over the JSON API: list, save, delete; same rules as the pages."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from streams_app.audit.models import AuditEvent
from streams_app.saved.models import SavedView
from tests.console.conftest import make_user
from tests.console.helpers import bearer, dlq_url, post_json

VIEWS = "/api/v1/views/"


def test_save_list_and_delete_through_the_api(operator: User, api_token, db) -> None:
    token = api_token(operator)
    url = dlq_url("orders:dlq") + "?error=timeout"
    saved = post_json(VIEWS, {"name": "timeouts", "url": url, "shared": True}, token)
    assert saved.status_code == 201
    body = saved.json()
    assert (body["name"], body["url"], body["shared"], body["mine"], body["owner"]) == (
        "timeouts",
        url,
        True,
        True,
        operator.username,
    )
    view = SavedView.objects.get()
    assert (view.pk, view.url, view.shared) == (body["id"], url, True)

    listed = Client().get(VIEWS, **bearer(token)).json()
    assert [v["id"] for v in listed["views"]] == [view.pk] and listed["next"] is None

    deleted = post_json(f"{VIEWS}{view.pk}/delete", {}, token)
    assert deleted.status_code == 200 and deleted.json() == {"id": view.pk, "deleted": True}
    assert not SavedView.objects.exists()
    assert list(AuditEvent.objects.order_by("pk").values_list("action", "outcome")) == [
        ("view.share", "ok"),
        ("view.delete", "ok"),
    ]


@pytest.mark.parametrize(
    "url",
    [
        "https://evil.example/",
        "//evil",
        "/\\evil",
        "javascript:alert(1)",
        "/api/v1/views/",
        "/c/default/streams/orders/replay/",
    ],
)
def test_external_or_non_page_urls_are_refused_with_400(viewer: User, api_token, url: str) -> None:
    reply = post_json(VIEWS, {"name": "x", "url": url}, api_token(viewer))
    assert reply.status_code == 400 and reply.json()["error"]["code"] == "bad_request"
    assert not SavedView.objects.exists()
    assert list(AuditEvent.objects.values_list("action", "outcome")) == [("view.save", "error")]


def test_a_viewer_may_not_share_and_bodies_are_typed(viewer: User, api_token) -> None:
    token = api_token(viewer)
    refused = post_json(VIEWS, {"name": "x", "url": "/jobs/", "shared": True}, token)
    assert refused.status_code == 403
    assert post_json(VIEWS, {"name": "x", "url": "/jobs/", "shared": "yes"}, token).status_code == 400
    assert post_json(VIEWS, {"name": "", "url": "/jobs/"}, token).status_code == 400
    assert post_json(VIEWS, {"name": "x", "url": "/jobs/", "extra": 1}, token).status_code == 400
    assert not SavedView.objects.exists()
    assert post_json(VIEWS, {"name": "x", "url": "/jobs/"}, token).status_code == 201
    assert SavedView.objects.get().shared is False
    assert list(AuditEvent.objects.order_by("pk").values_list("action", "outcome"))[0] == (
        "view.share",
        "denied",
    )


def test_private_views_are_not_listed_to_others_nor_deletable(
    viewer: User, operator: User, api_token
) -> None:
    other = make_user("sam-stranger", groups=("viewer",))
    private = SavedView.objects.create(owner=viewer, name="private", path="/audit/")
    shared = SavedView.objects.create(owner=operator, name="shared", path="/jobs/", shared=True)
    token = api_token(other)
    listed = Client().get(VIEWS, **bearer(token)).json()["views"]
    assert [(v["id"], v["mine"]) for v in listed] == [(shared.pk, False)]
    assert post_json(f"{VIEWS}{private.pk}/delete", {}, token).status_code == 404
    assert post_json(f"{VIEWS}{shared.pk}/delete", {}, token).status_code == 403
    assert SavedView.objects.count() == 2
    mine = Client().get(VIEWS + "?mine=true", **bearer(api_token(viewer))).json()["views"]
    assert [v["id"] for v in mine] == [private.pk]


def test_the_list_pages_newest_first(viewer: User, api_token) -> None:
    made = [SavedView.objects.create(owner=viewer, name=f"v{i}", path="/jobs/") for i in range(5)]
    token = api_token(viewer)
    first = Client().get(VIEWS + "?count=3", **bearer(token)).json()
    assert [v["name"] for v in first["views"]] == ["v4", "v3", "v2"]
    rest = Client().get(f"{VIEWS}?count=3&before={first['next']}", **bearer(token)).json()
    assert [v["name"] for v in rest["views"]] == ["v1", "v0"] and rest["next"] is None
    assert len(made) == 5
    assert Client().get(VIEWS + "?count=0", **bearer(token)).status_code == 400


def test_anonymous_callers_get_401(client: Client, db) -> None:
    assert client.get(VIEWS).status_code == 401
    assert client.post(VIEWS, "{}", content_type="application/json").status_code == 401
