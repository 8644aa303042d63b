"""The pages that read the mirror: the streams list (filtered, sorted and paged from the mirror rows,
with live figures from Redis, and scanning Redis while the mirror is empty) and the read-only admin.

Expected keys and lengths come from the streams the test wrote and from XLEN on the live server.
"""

from __future__ import annotations

import re

import redis
from django.test import Client

from streams_app.metrics import mirror, snapshots
from tests.console.helpers import CONN
from tests.console.metrics.helpers import T0, bus, mirror_row


def test_streams_page_filters_sorts_and_pages_the_mirror(r: redis.Redis, viewer_client: Client) -> None:
    bus(r)
    for i in range(5):
        r.xadd(f"busy:{i}", {"x": "1"})
        r.xgroup_create(f"busy:{i}", "g", id="0")
        for _ in range(i):
            r.xadd(f"busy:{i}", {"x": "1"})
        if i:
            r.xreadgroup("g", "c", {f"busy:{i}": ">"}, count=i)
    mirror.mirror_sync(conn=CONN)
    r.xadd("busy:0", {"after": "sync"})  # live figures on screen, the mirror's as of the sync

    body = viewer_client.get("/c/default/streams/?match=busy:*&sort=pending&count=3").content.decode()
    assert "listed from the mirror as of" in body
    assert [f"busy%3A{i}" for i in (4, 3, 2)] == _keys(body)
    assert "5 streams" in body and 'rel="next"' in body
    second = viewer_client.get("/c/default/streams/?match=busy:*&sort=pending&count=3&offset=3").content.decode()
    assert _keys(second) == ["busy%3A1", "busy%3A0"]
    assert f'<td class="num">{r.xlen("busy:0")}</td>' in second  # live length, not the mirror's

    assert _keys(viewer_client.get("/c/default/streams/?match=DLQ").content.decode()) == ["orders%3Adlq"]  # substring
    by_length = _keys(viewer_client.get("/c/default/streams/?match=busy:[34]&sort=length").content.decode())
    assert by_length == ["busy%3A4", "busy%3A3"]

    r.delete("busy:4")  # deleted since the sync: still listed until the next one, marked gone
    assert ">gone<" in viewer_client.get("/c/default/streams/?match=busy:4").content.decode()
    mirror.mirror_sync(conn=CONN)
    assert _keys(viewer_client.get("/c/default/streams/?match=busy:4").content.decode()) == []


def test_streams_page_scans_redis_while_the_mirror_is_empty(r: redis.Redis, viewer_client: Client) -> None:
    r.xadd("s", {"x": "1"})
    body = viewer_client.get("/c/default/streams/").content.decode()
    assert "from the mirror" not in body and _keys(body) == ["s"]
    mirror.mirror_sync(conn=CONN)
    r.xadd("t", {"x": "1"})
    assert _keys(viewer_client.get("/c/default/streams/").content.decode()) == ["s"]
    assert sorted(_keys(viewer_client.get("/c/default/streams/?live=1").content.decode())) == ["s", "t"]


def _keys(body: str) -> list[str]:
    return re.findall(r'<a class="mono" href="/c/default/streams/([^"/]+)/">', body)


def test_admin_shows_the_mirror_read_only(r: redis.Redis, db, client: Client, django_user_model) -> None:
    bus(r)
    mirror.mirror_sync(conn=CONN)
    snapshots.snapshot_take(tick=T0)
    admin = django_user_model.objects.create_superuser("root", "root@example.com", "pw-for-tests-1")
    client.force_login(admin)
    for model in ("streammirror", "groupmirror", "consumermirror", "snapshotrun"):
        assert client.get(f"/admin/streams_app/{model}/").status_code == 200
        assert client.get(f"/admin/streams_app/{model}/add/").status_code == 403
    row = mirror_row("orders")
    page = client.get(f"/admin/streams_app/streammirror/{row.pk}/change/")
    assert page.status_code == 200 and b'name="length"' not in page.content  # no editable inputs
    assert client.post(f"/admin/streams_app/streammirror/{row.pk}/delete/").status_code == 403
