"""The read side of the JSON API (docs/api.md#addresses): connections, streams, stream info, entries and
pending entries, for each role and with API tokens.

Django's test client (and, for keys with ``/`` and ``%``, a real uvicorn) against a real
redis-server. Expected shapes are built from what Redis reports (XINFO STREAM, XINFO GROUPS, XLEN) and
from the IDs the test wrote; errors must be JSON with the documented codes (400, 401, 404, 503).
"""

from __future__ import annotations

import httpx
import pytest
import redis
from django.test import Client

from streams_app.redis_ops import client as redis_client
from tests.conftest import session_cookie
from tests.console.helpers import stream_api, stream_url

ENDPOINTS = [
    "/api/v1/connections/",
    "/api/v1/c/default/streams/",
    stream_api("s"),
    stream_api("s", "entries/"),
    stream_api("s", "groups/g/pending/"),
]


@pytest.fixture
def stream(r: redis.Redis) -> list[str]:
    ids = [r.xadd("s", {"type": "t", "data": f'{{"n": {i}}}'}).decode() for i in range(12)]
    r.xgroup_create("s", "g", id="0")
    r.xreadgroup("g", "c1", {"s": ">"}, count=3)
    return ids


@pytest.mark.parametrize("path", ENDPOINTS)
def test_anonymous_gets_json_401(client: Client, stream, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"


@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize("who", ["viewer", "operator", "admin_user"])
def test_every_role_reads_with_a_token(request, api_token, stream, path: str, who: str) -> None:
    token = api_token(request.getfixturevalue(who))
    response = Client().get(path, HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200, response.content


def test_bad_token_is_401(client: Client, db) -> None:
    response = client.get("/api/v1/connections/", HTTP_AUTHORIZATION="Bearer bct_nope")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"


def test_connections_hide_passwords(settings, viewer_client: Client) -> None:
    settings.BUS_REDIS_URLS = {"default": settings.BUS_REDIS_URLS["default"],
                               "secret": "redis://user:hunter2@127.0.0.1:1/3"}
    body = viewer_client.get("/api/v1/connections/")
    assert "hunter2" not in body.content.decode()
    by_name = {c["name"]: c for c in body.json()["connections"]}
    assert by_name["default"]["ok"] is True and by_name["default"]["redis_version"]
    assert by_name["secret"] == {"name": "secret", "host": "127.0.0.1", "port": 1, "db": 3, "ok": False,
                                 "redis_version": None, "server": None, "error": by_name["secret"]["error"]}


def test_streams_shape(viewer_client: Client, r: redis.Redis, stream) -> None:
    r.xadd("s:dlq", {"a": "1"})
    data = viewer_client.get("/api/v1/c/default/streams/").json()
    rows = {row["key"]: row for row in data["streams"]}
    assert data["next_cursor"] is None
    assert rows["s"]["length"] == r.xlen("s")
    assert rows["s"]["first_id"] == stream[0] and rows["s"]["last_id"] == stream[-1]
    assert rows["s"]["groups"] == 1 and rows["s"]["pending"] == 3
    assert rows["s"]["url"] == "/c/default/streams/s/"
    assert rows["s"]["is_dlq"] is False and rows["s:dlq"]["is_dlq"] is True


def test_stream_info_shape(viewer_client: Client, r: redis.Redis, stream) -> None:
    data = viewer_client.get(stream_api("s")).json()
    xinfo = r.xinfo_stream("s")
    assert data["length"] == xinfo["length"]
    assert data["last_generated_id"] == xinfo["last-generated-id"].decode()
    assert data["entries_added"] == xinfo["entries-added"]
    [g] = data["groups"]
    raw = r.xinfo_groups("s")[0]
    assert g == {"name": "g", "consumers": raw["consumers"], "pending": raw["pending"],
                 "last_delivered_id": raw["last-delivered-id"].decode(), "entries_read": raw["entries-read"],
                 "lag": raw["lag"]}


def test_entries_paging_both_ways(viewer_client: Client, stream) -> None:
    seen, cursor = [], None
    for _ in range(20):
        url = stream_api("s", "entries/?count=5") + (f"&before={cursor}" if cursor else "")
        data = viewer_client.get(url).json()
        seen += [e["id"] for e in data["entries"]]
        cursor = data["next"]
        if cursor is None:
            break
    assert seen == stream[::-1]
    seen, cursor = [], None
    for _ in range(20):
        url = stream_api("s", "entries/?order=asc&count=5") + (f"&after={cursor}" if cursor else "")
        data = viewer_client.get(url).json()
        seen += [e["id"] for e in data["entries"]]
        cursor = data["next"]
        if cursor is None:
            break
    assert seen == stream


def test_entries_decoded(viewer_client: Client, r: redis.Redis) -> None:
    import msgpack

    eid = r.xadd("d", {"j": '{"a": [1, 2]}', "m": msgpack.packb({"k": "v"}), "b": b"\xff\x00", "t": "plain"})
    [entry] = viewer_client.get(stream_api("d", "entries/")).json()["entries"]
    assert entry["id"] == eid.decode()
    decoded = {d["name"]: d for d in entry["decoded"]}
    assert decoded["j"]["format"] == "json" and decoded["j"]["value"] == {"a": [1, 2]}
    assert decoded["m"]["format"] == "msgpack" and decoded["m"]["value"] == {"k": "v"}
    assert decoded["b"]["format"] == "hex"
    assert entry["fields"]["t"] == "plain"


@pytest.mark.parametrize(
    "query,status",
    [("?count=0", 400), ("?count=5000", 400), ("?before=zz", 400), ("?at=yesterday", 400),
     ("?order=sideways", 400), ("?after=1-0&before=2-0", 400)],
)
def test_bad_parameters_are_json_400(viewer_client: Client, stream, query: str, status: int) -> None:
    response = viewer_client.get(stream_api("s", "entries/" + query))
    assert response.status_code == status
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"]["code"] == "bad_request"


def test_not_found_is_json_404(viewer_client: Client, stream) -> None:
    for path in (stream_api("missing"), stream_api("missing", "entries/"), stream_api("s", "groups/nope/pending/"),
                 "/api/v1/c/nope/streams/", "/api/v1/no-such-endpoint/"):
        response = viewer_client.get(path)
        assert response.status_code == 404, path
        assert response.json()["error"]["code"] == "not_found"


def test_a_missing_object_found_by_a_view_is_json_404_not_500(viewer_client: Client) -> None:
    """A view's own ``get_object_or_404`` (not only an unmatched URL) answers the API in JSON."""
    response = viewer_client.get("/api/v1/jobs/999999")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_pending_shape(viewer_client: Client, r: redis.Redis, stream) -> None:
    r.xdel("s", stream[1])
    data = viewer_client.get(stream_api("s", "groups/g/pending/")).json()
    longest = data["summary"].pop("longest_idle")  # its figure: tests/console/views/test_longest_idle.py
    assert data["summary"] == {"count": 3, "min_id": stream[0], "max_id": stream[2], "consumers": {"c1": 3}}
    assert set(longest) == {"id", "idle_ms", "exact"} and longest["id"] in stream[:3]
    assert [(e["id"], e["consumer"], e["deliveries"], e["exists"]) for e in data["entries"]] == [
        (stream[0], "c1", 1, True), (stream[1], "c1", 1, False), (stream[2], "c1", 1, True)]
    assert data["next"] is None


def test_redis_down_is_json_503(settings, viewer_client: Client, spare_redis) -> None:
    settings.BUS_REDIS_URLS = {"spare": spare_redis.url(0)}
    redis_client.reset()
    spare_redis.stop()
    for path in ("/api/v1/c/spare/streams/", "/api/v1/c/spare/streams/s/", "/api/v1/c/spare/streams/s/entries/"):
        response = viewer_client.get(path)
        assert response.status_code == 503
        assert response.json()["error"]["code"] == "unreachable"
    assert viewer_client.get("/api/v1/connections/").json()["connections"][0]["ok"] is False


def test_keys_with_slash_and_percent_through_a_real_server(asgi_server, viewer, r: redis.Redis) -> None:
    """A real ASGI server hands Django the raw path, so %2F and %25 in a key survive."""
    keys = [b"a/b", b"100%25", b"%", b"x%2Fy", b"\xff/\x00", "p\u00e4th/\u2603".encode()]
    ids = {key: r.xadd(key, {"k": key}).decode() for key in keys}
    with httpx.Client(base_url=asgi_server.url, cookies=session_cookie(viewer)) as http:
        for key in keys:
            response = http.get(stream_api(key, "entries/"))
            assert response.status_code == 200, (key, response.text)
            assert [e["id"] for e in response.json()["entries"]] == [ids[key]]
            page = http.get(stream_url(key))
            assert page.status_code == 200 and ids[key] in page.text
        listed = http.get("/api/v1/c/default/streams/").json()["streams"]
        assert sorted(row["url"] for row in listed) == sorted(stream_url(k) for k in keys)
