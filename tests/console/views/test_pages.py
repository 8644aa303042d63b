"""The read-only pages (overview, streams list, stream, group, entry, raw download), for each role.

Every page is rendered by Django's test client against a real redis-server. Expected values are read
from Redis itself (XLEN, XREVRANGE, XINFO GROUPS) or are the IDs and payloads the test wrote; stored
XSS payloads must come back escaped, and an unreachable Redis must give a banner or a 503, not a 500.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
import redis
from django.test import Client

from streams_app.redis_ops import client as redis_client
from tests.console.helpers import seg, stream_url

XSS = [
    "<script>alert(1)</script>",
    '<img src=x onerror="alert(2)">',
    '"><svg onload=alert(3)>',
    "' onmouseover='alert(4)",
]


@pytest.fixture
def bus(r: redis.Redis) -> redis.Redis:
    """A small bus: a stream with a group, pending entries and one deleted-but-pending entry."""
    ids = [r.xadd("orders", {"type": "order.created", "data": f'{{"order_id": {i}}}'}).decode() for i in range(30)]
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "worker-1", {"orders": ">"}, count=5)
    r.xdel("orders", ids[2])
    r.xadd("orders:dlq", {"type": "order.created", "data": "{}", "_retries": "5"})
    r.bus_ids = ids  # type: ignore[attr-defined]  # the IDs ride on the client for the tests that use this fixture
    return r


PAGES = ["/", "/c/default/streams/", stream_url("orders"), stream_url("orders") + "groups/billing/"]


@pytest.mark.parametrize("path", PAGES)
def test_anonymous_is_sent_to_login(client: Client, bus, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=")


@pytest.mark.parametrize("path", PAGES)
@pytest.mark.parametrize("who", ["viewer_client", "operator_client", "admin_client_"])
def test_every_role_reads_every_page(request, bus, path: str, who: str) -> None:
    response = request.getfixturevalue(who).get(path)
    assert response.status_code == 200, response.content[:500]


def test_streams_page_lists_streams_with_length_and_dlq_mark(viewer_client: Client, bus) -> None:
    body = viewer_client.get("/c/default/streams/").content.decode()
    assert f'href="{stream_url("orders")}"' in body
    assert f'href="{stream_url("orders:dlq")}"' in body
    assert ">DLQ<" in body
    assert f'<td class="num">{bus.xlen("orders")}</td>' in body


def test_streams_page_filters_by_glob_and_sorts_by_length(viewer_client: Client, r: redis.Redis) -> None:
    for name, n in (("a:short", 1), ("a:long", 9), ("a:mid", 4), ("other", 20)):
        for _ in range(n):
            r.xadd(name, {"x": "1"})
    body = viewer_client.get("/c/default/streams/?match=a:*&sort=length").content.decode()
    order = re.findall(r'href="/c/default/streams/(a%3A\w+)/"', body)
    assert order == ["a%3Along", "a%3Amid", "a%3Ashort"]
    assert "other" not in body


def test_stream_page_shows_groups_entries_and_times(viewer_client: Client, bus) -> None:
    body = viewer_client.get(stream_url("orders")).content.decode()
    newest = bus.xrevrange("orders", count=1)[0][0].decode()
    assert newest in body
    assert 'href="/c/default/streams/orders/groups/billing/"' in body
    lag = bus.xinfo_groups("orders")[0]["lag"]
    assert f"<strong>{lag}</strong>" in body
    assert "UTC" in body  # human time beside each ID
    assert f'href="{stream_url("orders:dlq")}"' in body  # the dead letters of this stream


def test_stream_page_pages_older_and_newer(viewer_client: Client, bus) -> None:
    all_ids = [e[0].decode() for e in bus.xrevrange("orders")]
    first = viewer_client.get(stream_url("orders") + "?count=10").content.decode()
    shown = re.findall(r'<a href="[^"]+/entries/(\d+-\d+)/">', first)
    assert shown == all_ids[:10]
    older = re.search(r'rel="next" href="([^"]+)"', first).group(1)
    second = viewer_client.get(stream_url("orders") + html.unescape(older)).content.decode()
    assert re.findall(r'<a href="[^"]+/entries/(\d+-\d+)/">', second) == all_ids[10:20]


def test_jump_to_id_and_bad_id(viewer_client: Client, bus) -> None:
    target = bus.bus_ids[10]
    body = viewer_client.get(stream_url("orders") + f"?at={target}").content.decode()
    assert re.findall(r'/entries/(\d+-\d+)/">', body)[0] == target
    bad = viewer_client.get(stream_url("orders") + "?before=not-an-id")
    assert bad.status_code == 400
    assert "is not a stream ID" in bad.content.decode()


def test_group_page_consumers_and_pending_with_deleted_mark(viewer_client: Client, bus) -> None:
    body = viewer_client.get(stream_url("orders") + "groups/billing/").content.decode()
    assert "worker-1" in body
    for pending_id in bus.bus_ids[:5]:
        assert pending_id in body
    assert body.count(">deleted</span>") == 1
    filtered = viewer_client.get(stream_url("orders") + "groups/billing/?min_idle_ms=3600000").content.decode()
    assert "Nothing pending for this filter" in filtered


def test_entry_page_and_raw_download(viewer_client: Client, r: redis.Redis) -> None:
    big = b"x" * (70 * 1024)
    eid = r.xadd("s", {"big": big, "small": b"hi"}).decode()
    body = viewer_client.get(stream_url("s") + f"entries/{eid}/").content.decode()
    assert "Download the whole value" in body
    raw = viewer_client.get(stream_url("s") + f"entries/{eid}/raw/?field=0")
    assert raw.status_code == 200 and raw.content == big
    assert raw["Content-Disposition"].startswith("attachment")
    assert viewer_client.get(stream_url("s") + f"entries/{eid}/raw/?field=9").status_code == 400
    assert viewer_client.get(stream_url("s") + "entries/1-1/").status_code == 404


def test_unknown_stream_group_and_connection_are_404(viewer_client: Client, bus) -> None:
    assert viewer_client.get(stream_url("nope")).status_code == 404
    assert viewer_client.get(stream_url("orders") + "groups/nope/").status_code == 404
    assert viewer_client.get("/c/nope/streams/").status_code == 404


def test_stored_xss_comes_back_escaped(viewer_client: Client, r: redis.Redis) -> None:
    import json

    for payload in XSS:
        r.xadd("xss", {payload: payload, "json": json.dumps({"html": payload})})
    # Group and consumer names are attacker-controlled too.
    r.xgroup_create("xss", XSS[0], id="0")
    r.xreadgroup(XSS[0], XSS[1], {"xss": ">"})
    pages = [stream_url("xss"), "/c/default/streams/", stream_url("xss") + "groups/" + seg(XSS[0]) + "/"]
    for path in pages:
        body = viewer_client.get(path).content.decode()
        for payload in XSS:
            assert payload not in body, (path, payload)
        assert "<script>alert" not in body
        assert "<img src=x" not in body and "<svg onload" not in body
    assert html.escape(XSS[0]) in viewer_client.get(stream_url("xss")).content.decode()


def test_binary_and_unicode_keys_round_trip_in_urls(viewer_client: Client, r: redis.Redis) -> None:
    for key in (b"\xff\xfe-binary", "snowman-\u2603".encode(), b"with space+plus", b"a:b:c"):
        eid = r.xadd(key, {b"\x00": b"\xff"}).decode()
        response = viewer_client.get(stream_url(key))
        assert response.status_code == 200, key
        assert eid in response.content.decode()


def test_redis_down_shows_a_banner_not_a_500(settings, viewer_client: Client, spare_redis) -> None:
    settings.BUS_REDIS_URLS = {"default": settings.BUS_REDIS_URLS["default"], "spare": spare_redis.url(0)}
    redis_client.reset()
    redis.Redis.from_url(spare_redis.url(0)).xadd("s", {"a": "1"})
    assert viewer_client.get("/c/spare/streams/s/").status_code == 200
    spare_redis.stop()
    for path in ("/c/spare/streams/", "/c/spare/streams/s/", "/c/spare/streams/s/groups/g/"):
        response = viewer_client.get(path)
        assert response.status_code == 503
        assert "is unreachable" in response.content.decode()
    overview = viewer_client.get("/")
    assert overview.status_code == 200
    assert "unreachable" in overview.content.decode()


def test_htmx_request_gets_only_the_partial(viewer_client: Client, bus) -> None:
    full = viewer_client.get("/c/default/streams/").content.decode()
    part = viewer_client.get("/c/default/streams/", HTTP_HX_REQUEST="true").content.decode()
    assert "<html" in full and "<html" not in part
    assert part.lstrip().startswith('<section id="streams-table"')


def test_healthz_needs_no_login(client: Client, db) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200 and response.content == b"ok"


def test_stream_page_links_the_dead_letters_of_each_convention(viewer_client: Client, r: redis.Redis) -> None:
    r.xadd("omni-stream:orders", {"data": "{}"})
    r.xgroup_create("omni-stream:orders", "agent-a", id="0")
    r.xgroup_create("omni-stream:orders", "agent-b", id="0")
    r.xadd("omni-dlq:agent-a", {"data": '{"error": "boom"}'})  # agent-b has no DLQ: no link
    body = viewer_client.get(stream_url("omni-stream:orders")).content.decode()
    assert 'href="/c/default/dlq/omni-dlq%3Aagent-a/"' in body
    assert "omni-dlq%3Aagent-b" not in body
    r.xadd("plain", {"a": "1"})
    assert "Dead letters" not in viewer_client.get(stream_url("plain")).content.decode()


@pytest.mark.parametrize("key", [b"orders:dlq", b"team a orders:dlq", b"bin\xff:dlq"])
def test_the_dlq_page_s_json_button_opens_the_same_dlq_in_the_api(viewer_client: Client, r, key: bytes) -> None:
    entry_id = r.xadd(key, {"type": "order.created", "data": "{}", "dlq_error": "boom"}).decode()
    page = viewer_client.get(f"/c/default/dlq/{seg(key)}/")
    assert page.status_code == 200, page.content[:300]
    [href] = re.findall(r'href="([^"]+)">JSON</a>', page.content.decode())
    assert href == f"/api/v1/c/default/dlq/{seg(key)}/"  # the key's bytes, encoded once
    reply = viewer_client.get(html.unescape(href))
    assert reply.status_code == 200, reply.content[:300]
    assert [e["id"] for e in reply.json()["entries"]] == [entry_id]


def test_every_page_names_a_favicon_that_is_served(viewer_client: Client, client: Client, bus) -> None:
    from django.contrib.staticfiles import finders

    for web, path in ((viewer_client, "/"), (client, "/login/"), (viewer_client, "/api/v1/docs/")):
        body = web.get(path).content.decode()
        [href] = re.findall(r'<link rel="icon" type="image/svg\+xml" href="/static/([^"]+)">', body)
        found = finders.find(href)
        assert found and Path(found).read_text().startswith("<svg")


@pytest.mark.parametrize("rest", ["", "groups/g%FF/"])
def test_a_page_of_a_non_utf8_key_refreshes_itself_from_the_key_s_bytes(viewer_client: Client, r, rest) -> None:
    key = b"bin\xff orders"
    r.xadd(key, {"type": "t", "data": "{}"})
    r.xgroup_create(key, b"g\xff", id="0")
    r.xreadgroup(b"g\xff", b"c", {key: ">"})
    page = stream_url(key) + rest
    shown = viewer_client.get(page + "?count=10")
    assert shown.status_code == 200, shown.content[:300]
    [refresh] = re.findall(r'<section id="(?:entries|pending)" hx-get="([^"]+)"', shown.content.decode())
    assert html.unescape(refresh) == page + "?count=10"
    again = viewer_client.get(html.unescape(refresh))
    assert again.status_code == 200


def test_a_dlq_page_of_a_non_utf8_key_refreshes_itself_from_the_key_s_bytes(viewer_client: Client, r) -> None:
    key = b"bin\xff:dlq"
    r.xadd(key, {"type": "t", "data": "{}", "dlq_error": "boom"})
    page = f"/c/default/dlq/{seg(key)}/"
    shown = viewer_client.get(page + "?error=boom")
    [refresh] = re.findall(r'<section id="entries" hx-get="([^"]+)"', shown.content.decode())
    assert html.unescape(refresh) == page + "?error=boom"
    assert viewer_client.get(html.unescape(refresh)).status_code == 200
