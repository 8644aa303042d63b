"""Saved views from the pages: save from a filtered page, list, open, rename, delete, who sees what.

What a reopened view shows is compared with what Redis holds (the DLQ entries whose error matches,
the pending entries of one consumer), computed here in plain Python from XRANGE and XPENDING.
"""

from __future__ import annotations

import re

import pytest
import redis
from django.contrib.auth.models import User
from django.test import Client

from streams_app.audit.models import AuditEvent
from streams_app.saved.models import SavedView
from tests.console.conftest import logged_in, make_user
from tests.console.helpers import dlq_url, group_url, seg, stream_url
from tests.console.services.helpers import orders_bus

DLQ_ROW = re.compile(r'<tr id="dlq-[^"]+" data-id="([0-9]+-[0-9]+)"')
ENTRY_ROW = re.compile(r'<a href="/c/default/streams/[^"]+/entries/([0-9]+-[0-9]+)/">')
PENDING_ROW = re.compile(r'<tr class="[^"]*" data-id="([0-9]+-[0-9]+)"')


def _save(web: Client, url: str, name: str, *, shared: bool = False):
    data = {"name": name, "url": url, **({"shared": "1"} if shared else {})}
    return web.post("/views/", data)


def _rows(pattern: re.Pattern[str], web: Client, url: str) -> list[str]:
    reply = web.get(url)
    assert reply.status_code == 200, url
    return pattern.findall(reply.content.decode())


@pytest.fixture
def bus(r: redis.Redis):
    return orders_bus(r)


@pytest.fixture
def stranger(db) -> User:
    return make_user("sam-stranger", groups=("viewer",))


def test_a_filtered_dlq_page_saved_and_reopened_shows_the_same_rows(
    viewer: User, viewer_client: Client, bus
) -> None:
    url = dlq_url("orders:dlq") + "?error=card+1+declined"
    saved = _save(viewer_client, url, "card 1")
    assert saved.status_code == 302 and saved["Location"] == url  # back on the page it saved

    view = SavedView.objects.get()
    assert (view.owner, view.name, view.url, view.shared) == (viewer, "card 1", url, False)
    expected = [
        i.decode() for i, f in reversed(bus.r.xrange("orders:dlq")) if b"card 1 declined" in f[b"dlq_error"]
    ]
    assert len(expected) == 1
    assert _rows(DLQ_ROW, viewer_client, view.url) == expected
    assert _rows(DLQ_ROW, viewer_client, dlq_url("orders:dlq")) != expected  # the filter is what decides

    listing = viewer_client.get("/views/").content.decode()
    assert f'href="{dlq_url("orders:dlq")}?error=card+1+declined"' in listing and "card 1" in listing
    overview = viewer_client.get("/").content.decode()
    assert (
        'id="saved-views"' in overview and f'href="{dlq_url("orders:dlq")}?error=card+1+declined"' in overview
    )


def test_a_group_page_with_a_consumer_filter_saved_and_reopened(
    operator_client: Client, r: redis.Redis, bus
) -> None:
    r.xreadgroup("billing", "worker-2", {"orders": ">"}, count=2)  # two more pending, on another consumer
    url = group_url("orders", "billing") + "?consumer=worker-2"
    assert _save(operator_client, url, "worker-2 stuck", shared=True).status_code == 302
    view = SavedView.objects.get()
    assert view.shared and view.path == group_url("orders", "billing") and view.query == "consumer=worker-2"

    expected = sorted(
        p["message_id"].decode()
        for p in r.xpending_range("orders", "billing", "-", "+", 100)
        if p["consumer"] == b"worker-2"
    )
    assert len(expected) == 2
    assert sorted(_rows(PENDING_ROW, operator_client, view.url)) == expected


def test_a_binary_key_s_page_is_saved_and_reopened_byte_for_byte(
    viewer_client: Client, r: redis.Redis
) -> None:
    key = b"\xff\xfebin\x00key:\xe9"  # not UTF-8, a NUL; no "/" or "%" (the test client decodes the path)
    ids = [r.xadd(key, {"n": str(i)}).decode() for i in range(3)]
    url = stream_url(key) + "?order=asc"
    assert _save(viewer_client, url, "binary").status_code == 302
    view = SavedView.objects.get()
    assert view.url == url and view.path == f"/c/default/streams/{seg(key)}/"
    shown = _rows(ENTRY_ROW, viewer_client, view.url)
    assert shown == ids  # this key's entries, oldest first, as saved


def test_a_view_of_a_deleted_stream_opens_the_page_s_own_404(viewer_client: Client, r: redis.Redis) -> None:
    r.xadd("gone", {"n": "1"})
    _save(viewer_client, stream_url("gone"), "gone soon")
    r.delete("gone")
    assert viewer_client.get(SavedView.objects.get().url).status_code == 404


@pytest.mark.parametrize(
    "url",
    [
        "https://evil.example/",
        "//evil.example/x",
        "/\\evil.example/",
        "javascript:alert(1)",
        "\\\\evil",
        "http:/c/default/streams/",
        " //evil",
        "/c/default/streams/\n",
        "evil.example/c/default/streams/",
        "/api/v1/connections/",
        "/views/",
        "/c/default/streams/orders/trim/",
        "/no-such-page/",
        "/tokens/",
        "",
    ],
)
def test_anything_but_a_console_page_is_refused_with_400_and_audited(
    viewer_client: Client, db, url: str
) -> None:
    reply = _save(viewer_client, url, "bad")
    assert reply.status_code == 400
    assert not SavedView.objects.exists()
    row = AuditEvent.objects.get()
    assert (row.action, row.outcome) == ("view.save", "error")


def test_a_viewer_cannot_share_but_may_keep_private_views(viewer_client: Client, db) -> None:
    assert _save(viewer_client, "/c/default/streams/?match=orders*", "mine", shared=True).status_code == 403
    assert not SavedView.objects.exists()
    assert list(AuditEvent.objects.values_list("action", "outcome")) == [("view.share", "denied")]
    assert _save(viewer_client, "/c/default/streams/?match=orders*", "mine").status_code == 302
    assert SavedView.objects.get().shared is False
    assert "shared with everyone" not in viewer_client.get("/c/default/streams/").content.decode()


def test_private_views_are_invisible_to_others_and_shared_ones_visible(
    viewer: User, operator: User, stranger: User, db
) -> None:
    mine = SavedView.objects.create(
        owner=viewer, name="private-audit", path="/audit/", query="outcome=denied"
    )
    shared = SavedView.objects.create(
        owner=operator, name="shared-jobs", path="/jobs/", query="state=failed", shared=True
    )
    other = logged_in(stranger)
    for page in ("/views/", "/"):
        html = other.get(page).content.decode()
        assert "shared-jobs" in html and "private-audit" not in html, page
    both = logged_in(viewer).get("/views/").content.decode()
    assert "shared-jobs" in both and "private-audit" in both
    only_mine = logged_in(viewer).get("/views/?mine=1").content.decode()
    assert "private-audit" in only_mine and "shared-jobs" not in only_mine

    # Another user's private view is not found; a shared one is seen but not theirs to change.
    assert other.post(f"/views/{mine.pk}/delete/").status_code == 404
    assert other.post(f"/views/{mine.pk}/rename/", {"name": "x"}).status_code == 404
    assert other.post(f"/views/{shared.pk}/delete/").status_code == 403
    assert other.post(f"/views/{shared.pk}/rename/", {"name": "x"}).status_code == 403
    assert SavedView.objects.count() == 2
    assert sorted(AuditEvent.objects.values_list("action", "outcome")) == [
        ("view.delete", "denied"),
        ("view.delete", "error"),
        ("view.rename", "denied"),
        ("view.rename", "error"),
    ]


def test_rename_and_delete_by_the_owner_each_leave_one_audit_row(
    viewer: User, viewer_client: Client, db
) -> None:
    assert _save(viewer_client, "/jobs/?state=failed", "failed jobs").status_code == 302
    view = SavedView.objects.get()
    assert viewer_client.post(f"/views/{view.pk}/rename/", {"name": "  broken jobs "}).status_code == 302
    assert SavedView.objects.get().name == "broken jobs"
    assert viewer_client.post(f"/views/{view.pk}/rename/", {"name": ""}).status_code == 400
    assert viewer_client.post(f"/views/{view.pk}/delete/").status_code == 302
    assert not SavedView.objects.exists()
    rows = list(AuditEvent.objects.order_by("pk").values_list("action", "outcome", "username", "affected"))
    who = viewer.username
    assert rows == [
        ("view.save", "ok", who, 1),
        ("view.rename", "ok", who, 1),
        ("view.rename", "error", who, 0),
        ("view.delete", "ok", who, 1),
    ]
    assert AuditEvent.objects.get(action="view.rename", outcome="ok").parameters["old_name"] == "failed jobs"


def test_an_admin_may_delete_a_shared_view_but_not_a_private_one(
    operator: User, admin_client_: Client, db
) -> None:
    shared = SavedView.objects.create(owner=operator, name="s", path="/jobs/", shared=True)
    private = SavedView.objects.create(owner=operator, name="p", path="/jobs/")
    assert admin_client_.post(f"/views/{private.pk}/delete/").status_code == 404
    assert admin_client_.post(f"/views/{shared.pk}/delete/").status_code == 302
    assert list(SavedView.objects.values_list("name", flat=True)) == ["p"]


def test_saving_works_in_read_only_mode(settings, viewer_client: Client, db) -> None:
    settings.BUSCONSOLE_READ_ONLY = True
    assert _save(viewer_client, "/audit/?action=claim", "claims").status_code == 302
    assert SavedView.objects.filter(name="claims").exists()


def test_the_frame_offers_save_view_only_on_pages_that_can_be_saved(viewer_client: Client, bus) -> None:
    assert "data-save-view" in viewer_client.get(dlq_url("orders:dlq") + "?error=x").content.decode()
    assert "data-save-view" not in viewer_client.get("/tokens/").content.decode()
    form = viewer_client.get(group_url("orders", "billing") + "?consumer=worker-1").content.decode()
    value = re.search(r'name="url" value="([^"]*)"', form)
    assert value and value.group(1) == group_url("orders", "billing") + "?consumer=worker-1"


def test_anonymous_users_are_sent_to_log_in(client: Client, db) -> None:
    reply = client.post("/views/", {"name": "x", "url": "/jobs/"})
    assert reply.status_code == 302 and "/login/" in reply["Location"]
    assert not SavedView.objects.exists()
