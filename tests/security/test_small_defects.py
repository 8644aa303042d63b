"""The review's smaller defects at the edges: 405 answers, ACL users without CLIENT SETNAME, non-ASCII digits
in entry IDs, bidi control characters in names, and stream keys longer than an HTTP request line.

Real redis-server (and, for the long key, a real uvicorn). Expected values come from Redis, from Python's
own ``quote`` and ``sha256``, or are spelled out by hand; never from the code under test.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
import uuid
from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest
import redis
from django.test import Client
from websockets.asyncio.client import connect

from streams_app.metrics import snapshots
from streams_app.redis_ops import client as redis_client
from streams_app.redis_ops.tail import TailReader
from tests.conftest import AsgiServer, session_cookie
from tests.console.helpers import CONN, api, group_url, seg, stream_api, stream_url
from tests.console.live.helpers import cookie_header, entries_of, run, until_live
from tests.servers import RedisServer

# ------------------------------------------------------------------------------------------------ 405


def test_api_method_not_allowed_is_a_json_error(viewer_client: Client, r: redis.Redis) -> None:
    r.xadd("s", {"a": "1"})
    r.xgroup_create("s", "g", id="0")
    response = viewer_client.get(stream_api("s", "groups/g/claim"))
    assert response.status_code == 405
    assert response["Content-Type"].startswith("application/json")
    assert response["Allow"] == "POST"
    error = response.json()["error"]
    assert error["code"] == "method_not_allowed"
    assert "GET" in error["message"] and "POST" in error["message"]


def test_api_read_refuses_post_with_a_json_error(viewer_client: Client, db) -> None:
    response = viewer_client.post(api("/connections/"), b"", content_type="application/json")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"
    assert "GET" in response["Allow"]


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("get", stream_url("s", "trim/"), "POST"),  # an action
        ("post", "/audit/", "GET"),  # a page
        ("get", "/logout/", "POST"),  # Django's own class-based view
    ],
)
def test_page_method_not_allowed_is_a_page(viewer_client: Client, r: redis.Redis, method: str, path: str,
                                           allowed: str) -> None:
    r.xadd("s", {"a": "1"})
    response = getattr(viewer_client, method)(path)
    assert response.status_code == 405
    assert response["Content-Type"].startswith("text/html")
    assert allowed in response["Allow"]
    body = response.content.decode()
    assert "405" in body and method.upper() in body and allowed in body
    assert "<html" in body  # the console's page, not an empty body


# ------------------------------------------------------------------ ACL user without CLIENT SETNAME

LIMITED_PASSWORD = "limited-pw-3"


@pytest.fixture
def limited_url(spare_redis: RedisServer) -> Iterator[str]:
    """A read-only ACL user on a server of the test's own: reads streams, may not name its connection."""
    admin = redis.Redis.from_url(spare_redis.url(0))
    admin.execute_command(
        "ACL", "SETUSER", "limited", "on", f">{LIMITED_PASSWORD}", "~*", "&*",
        "+@read", "+@connection", "+info", "-client|setname",
    )
    admin.xadd("orders", {"n": "1"})
    admin.xadd("orders", {"n": "2"})
    admin.xgroup_create("orders", "workers", id="0")
    yield f"redis://limited:{LIMITED_PASSWORD}@127.0.0.1:{spare_redis.port}/0"
    admin.close()


def test_the_acl_really_refuses_client_setname(limited_url: str) -> None:
    """The premise, from Redis itself: this user can read but not name its connection."""
    plain = redis.Redis.from_url(limited_url)
    assert plain.xlen("orders") == 2
    with pytest.raises(redis.exceptions.NoPermissionError):
        plain.client_setname("anything")
    plain.close()


def test_acl_user_without_setname_reads_pages_and_api(settings, limited_url: str, viewer_client: Client) -> None:
    settings.BUS_REDIS_URLS = {CONN: limited_url}
    redis_client.reset()
    page = viewer_client.get(f"/c/{CONN}/streams/?live=1")
    assert page.status_code == 200
    assert "orders" in page.content.decode()
    assert "unreachable" not in page.content.decode()
    assert viewer_client.get(stream_url("orders")).status_code == 200
    listed = viewer_client.get(api(f"/c/{CONN}/streams/"))
    assert listed.status_code == 200, listed.content
    assert [s["key"] for s in listed.json()["streams"]] == ["orders"]
    info = viewer_client.get(stream_api("orders")).json()
    assert info["length"] == 2
    assert [g["name"] for g in info["groups"]] == ["workers"]


def test_acl_user_without_setname_feeds_the_live_tail(settings, limited_url: str) -> None:
    """The tail's asyncio connections (reader and control) connect too."""
    settings.BUS_REDIS_URLS = {CONN: limited_url}
    expected = redis.Redis.from_url(limited_url).xrevrange("orders", count=1)[0][0].decode()

    async def read() -> tuple[str, int | None]:
        reader = TailReader(CONN)
        try:
            newest = await reader.newest_id(b"orders")
            await reader.connect_reader(block_ms=10)
            return newest, reader.reader_id
        finally:
            await reader.aclose()

    newest, reader_id = asyncio.run(read())
    assert newest == expected
    assert reader_id is not None


@pytest.mark.parametrize(("query", "name"), [("", "busconsole"), ("?client_name=ops-console", "ops-console")])
def test_connections_are_still_named_where_redis_allows_it(settings, spare_redis: RedisServer,
                                                           viewer_client: Client, query: str, name: str) -> None:
    """On a server of the test's own, so that only the console's connections are listed."""
    settings.BUS_REDIS_URLS = {CONN: spare_redis.url(0) + query}
    watcher = redis.Redis.from_url(spare_redis.url(0))
    watcher.client_setname("watcher")
    watcher.xadd("s", {"a": "1"})
    assert viewer_client.get(stream_url("s")).status_code == 200
    assert {c["name"] for c in watcher.client_list()} == {"watcher", name}
    watcher.close()


# ---------------------------------------------------------------------------- ASCII digits only

NON_ASCII_IDS = ["١-0", "1-١", "１２-0", "٣", "12-３", "৭-1"]


@pytest.mark.parametrize("value", NON_ASCII_IDS)
@pytest.mark.parametrize("param", ["after", "before"])
def test_api_refuses_non_ascii_digits_in_entry_ids(viewer_client: Client, r: redis.Redis, value: str,
                                                   param: str) -> None:
    r.xadd("s", {"a": "1"})
    response = viewer_client.get(stream_api("s", "entries/"), {param: value})
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "bad_request"
    assert param in error["message"]


@pytest.mark.parametrize("value", NON_ASCII_IDS)
def test_api_refuses_non_ascii_digits_in_at(viewer_client: Client, r: redis.Redis, value: str) -> None:
    r.xadd("s", {"a": "1"})
    response = viewer_client.get(stream_api("s", "entries/"), {"at": value})
    assert response.status_code == 400, response.content
    assert "at" in response.json()["error"]["message"]


def test_pending_and_pages_refuse_non_ascii_digits(viewer_client: Client, r: redis.Redis) -> None:
    r.xadd("s", {"a": "1"})
    r.xgroup_create("s", "g", id="0")
    pending = viewer_client.get(stream_api("s", "groups/g/pending/"), {"after": "١-0"})
    assert pending.status_code == 400
    assert "after" in pending.json()["error"]["message"]
    page = viewer_client.get(stream_url("s"), {"after": "١-0"})
    assert page.status_code == 400
    assert "after" in page.content.decode()


def test_ascii_ids_still_work(viewer_client: Client, r: redis.Redis) -> None:
    first = r.xadd("s", {"a": "1"}).decode()
    second = r.xadd("s", {"a": "2"}).decode()
    response = viewer_client.get(stream_api("s", "entries/"), {"after": first, "order": "asc"})
    assert [e["id"] for e in response.json()["entries"]] == [second]


# ------------------------------------------------------------------------- bidi control characters

BIDI = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069",
        "\u200e", "\u200f", "\u061c"]


def escaped(char: str) -> str:
    return f"\\u{ord(char):04x}"


@pytest.fixture
def bidi_names(r: redis.Redis) -> dict[str, str]:
    """A stream, group, consumer and field name each holding bidi controls, and a payload holding all."""
    names = {
        "key": "pay\u202eevil\u202c.exe",
        "group": "grp\u2066x\u2069\u200f",
        "consumer": "c\u202b1\u061c",
        "field": "f\u2067ld\u200e",
    }
    entry_id = r.xadd(names["key"], {names["field"]: "v" + "".join(BIDI) + "end"}).decode()
    r.xgroup_create(names["key"], names["group"], id="0")
    r.xreadgroup(names["group"], names["consumer"], {names["key"]: ">"}, count=1)
    return {**names, "id": entry_id}


def _shown(name: str) -> str:
    """How a name must read on screen: each bidi control as ``\\uNNNN``."""
    return "".join(escaped(c) if c in BIDI else c for c in name)


def test_pages_show_bidi_controls_escaped(viewer_client: Client, bidi_names: dict[str, str]) -> None:
    key, group = bidi_names["key"], bidi_names["group"]
    pages = {
        "streams": f"/c/{CONN}/streams/?live=1",
        "stream": stream_url(key),
        "group": group_url(key, group),
        "entry": stream_url(key, f"entries/{bidi_names['id']}/"),
    }
    for what, path in pages.items():
        response = viewer_client.get(path)
        assert response.status_code == 200, (what, response.content[:300])
        body = response.content.decode()
        raw = [c for c in BIDI if c in body]
        assert raw == [], f"{what} page shows raw bidi controls {[escaped(c) for c in raw]}"
        assert _shown(key) in body, what
    assert _shown(group) in viewer_client.get(group_url(key, group)).content.decode()
    assert _shown(bidi_names["consumer"]) in viewer_client.get(group_url(key, group)).content.decode()
    entry = viewer_client.get(stream_url(key, f"entries/{bidi_names['id']}/")).content.decode()
    assert _shown(bidi_names["field"]) in entry
    assert "v" + "".join(escaped(c) for c in BIDI) + "end" in entry


def test_api_names_show_bidi_controls_escaped(viewer_client: Client, bidi_names: dict[str, str]) -> None:
    key, group = bidi_names["key"], bidi_names["group"]
    listed = viewer_client.get(api(f"/c/{CONN}/streams/")).json()["streams"]
    assert [s["key"] for s in listed] == [_shown(key)]
    info = viewer_client.get(stream_api(key)).json()
    assert info["key"] == _shown(key)
    assert [g["name"] for g in info["groups"]] == [_shown(group)]
    pending = viewer_client.get(stream_api(key, f"groups/{seg(group)}/pending/")).json()
    assert list(pending["summary"]["consumers"]) == [_shown(bidi_names["consumer"])]
    assert [e["consumer"] for e in pending["entries"]] == [_shown(bidi_names["consumer"])]
    entry = viewer_client.get(stream_api(key, "entries/")).json()["entries"][0]
    assert list(entry["fields"]) == [_shown(bidi_names["field"])]
    # The decoded value is data for programs: it stays exactly what the producer wrote.
    assert entry["decoded"][0]["value"] == "v" + "".join(BIDI) + "end"


# ------------------------------------------------------------------------------- very long keys


def raw_get(server: AsgiServer, path: str, cookies: dict[str, str]) -> tuple[int, str, str]:
    """GET ``path`` over a plain socket (httpx refuses URLs over 64 KiB before sending them)."""
    cookie = "; ".join(f"{k}={v}" for k, v in cookies.items())
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {cookie}\r\nConnection: close\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(request.encode("ascii"))
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    content_type = next((line.split(":", 1)[1].strip() for line in lines if line.lower().startswith("content-type:")), "")
    return int(lines[0].split()[1]), content_type, body.decode("utf-8", "replace")


def _links(body: str, prefix: str) -> list[str]:
    """The href values of ``body`` that start with ``prefix``."""
    out = []
    for part in body.split('href="')[1:]:
        href = part.split('"', 1)[0]
        if href.startswith(prefix):
            out.append(href)
    return out


#: A 22 KB binary key: percent-encoded, its page's path is 66 KB, past uvicorn's 64 KiB request target.
LONG_TAIL = b"\xfe" * 22_000
#: Links longer than this break behind common proxies (nginx's 8 KiB request line) and h11's 16 KiB.
LINK_BUDGET = 4096


def long_key() -> bytes:
    """A fresh long key per test: a link remembered by an earlier test must not make this one pass."""
    return f"long:{uuid.uuid4().hex}:".encode() + LONG_TAIL


def digest_path(key: bytes, rest: str = "") -> str:
    return f"/c/{CONN}/streams/~sha256:{hashlib.sha256(key).hexdigest()}/{rest}"


@pytest.mark.django_db(transaction=True)
def test_long_key_is_listed_with_a_working_link(asgi_server: AsgiServer, r: redis.Redis, viewer) -> None:
    key = long_key()
    r.xadd(key, {"n": "1"})
    second = r.xadd(key, {"n": "2"}).decode()
    r.xgroup_create(key, "workers", id="0")
    cookies = session_cookie(viewer)
    status, content_type, _ = raw_get(asgi_server, f"/c/{CONN}/streams/{quote(key, safe='')}/", cookies)
    assert (status, content_type.split(";")[0]) == (400, "text/plain"), "the premise: uvicorn refuses such a URL"

    with httpx.Client(base_url=asgi_server.url, cookies=cookies, timeout=20) as http:
        for listing in ("?live=1", ""):  # scanning Redis, then from the mirror
            if listing == "":
                snapshots.mirror_sync(conn=CONN)
            page = http.get(f"/c/{CONN}/streams/{listing}")
            assert page.status_code == 200
            (link,) = [href for href in _links(page.text, f"/c/{CONN}/streams/") if href.endswith("/")
                       and href != f"/c/{CONN}/streams/"]
            assert len(link) <= LINK_BUDGET
            assert link == digest_path(key)

            stream_page = http.get(link)
            assert stream_page.status_code == 200, stream_page.text[:300]
            assert "workers" in stream_page.text
            assert link + f"entries/{second}/" in _links(stream_page.text, link + "entries/")
            assert http.get(link + f"entries/{second}/").status_code == 200
            assert http.get(link + "groups/workers/").status_code == 200

        listed = http.get(f"/api/v1/c/{CONN}/streams/").json()["streams"]
        (row,) = [s for s in listed if s["key"].startswith("long:")]
        assert len(row["url"]) <= LINK_BUDGET and len(row["api_url"]) <= LINK_BUDGET
        info = http.get(row["api_url"]).json()
        assert info["length"] == r.xlen(key) == 2


def test_a_digest_link_resolves_from_the_mirror(viewer_client: Client, r: redis.Redis) -> None:
    """A bookmarked link works without any page having listed the key first (the mirror knows it)."""
    key = long_key()
    r.xadd(key, {"n": "1"})
    snapshots.mirror_sync(conn=CONN)
    page = viewer_client.get(digest_path(key))
    assert page.status_code == 200
    answer = viewer_client.get("/api/v1" + digest_path(key, "entries/"))
    assert answer.status_code == 200
    assert [e["fields"] for e in answer.json()["entries"]] == [{"n": "1"}]


def test_unknown_digest_link_says_so(viewer_client: Client, r: redis.Redis) -> None:
    key = long_key()
    r.xadd(key, {"n": "1"})  # in Redis, but neither listed nor mirrored yet
    page = viewer_client.get(digest_path(key))
    assert page.status_code == 404
    assert "digest" in page.content.decode()
    answer = viewer_client.get("/api/v1" + digest_path(key))
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "not_found"
    assert "digest" in answer.json()["error"]["message"]


def test_anonymous_digest_link_goes_to_login_with_the_short_path(client: Client, db) -> None:
    path = digest_path(b"whatever")
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"] == "/login/?next=" + quote(path, safe="/")


def test_short_keys_keep_their_plain_links(viewer_client: Client, r: redis.Redis) -> None:
    key = b"orders:" + b"x" * 1000
    r.xadd(key, {"n": "1"})
    listed = viewer_client.get(api(f"/c/{CONN}/streams/")).json()["streams"]
    assert [s["url"] for s in listed] == [f"/c/{CONN}/streams/{quote(key, safe='')}/"]


@pytest.mark.django_db(transaction=True)
def test_long_key_live_tail_follows_its_digest_link(asgi_server: AsgiServer, r: redis.Redis, viewer) -> None:
    key = long_key()
    ids = [r.xadd(key, {"n": str(i)}).decode() for i in range(3)]
    cookies = session_cookie(viewer)
    with httpx.Client(base_url=asgi_server.url, cookies=cookies, timeout=20) as http:
        page = http.get(f"/c/{CONN}/streams/?live=1")  # the listing makes the digest link
        assert digest_path(key) in page.text
        tail_page = http.get(digest_path(key, "tail/"))
    assert tail_page.status_code == 200
    ws_path = tail_page.text.split('data-ws-path="', 1)[1].split('"', 1)[0]
    assert ws_path == "/ws" + digest_path(key, "tail/")

    async def replayed() -> list[str]:
        headers = {"Cookie": cookie_header(cookies)}
        url = f"ws://127.0.0.1:{asgi_server.port}{ws_path}?after=0-0"
        async with connect(url, origin=asgi_server.url, additional_headers=headers, proxy=None) as ws:
            return [e["id"] for e in entries_of(await until_live(ws))]

    assert run(replayed()) == ids


@pytest.mark.django_db(transaction=True)
def test_long_key_page_follows_its_stream_events(asgi_server: AsgiServer, r: redis.Redis, viewer, operator) -> None:
    """The page's event socket names the key by digest too, and still hears the stream's actions."""
    key = long_key()
    entry_id = r.xadd(key, {"n": "1"}).decode()
    r.xgroup_create(key, "workers", id="0")
    r.xreadgroup("workers", "c1", {key: ">"})
    cookies = session_cookie(viewer)
    with httpx.Client(base_url=asgi_server.url, cookies=cookies, timeout=20) as http:
        http.get(f"/c/{CONN}/streams/?live=1")  # the listing makes the digest link
        page = http.get(digest_path(key))
    events = page.text.split('data-stream-events="', 1)[1].split('"', 1)[0].replace("&amp;", "&")
    operator_cookies = session_cookie(operator)
    assert events == f"conn={CONN}&key=~sha256:{hashlib.sha256(key).hexdigest()}"

    async def changed() -> dict:
        headers = {"Cookie": cookie_header(cookies)}
        url = f"ws://127.0.0.1:{asgi_server.port}/ws/metrics/?{events}"
        async with connect(url, origin=asgi_server.url, additional_headers=headers, proxy=None) as ws:
            assert json.loads(await ws.recv()) == {"type": "status", "state": "live"}
            async with httpx.AsyncClient(base_url=asgi_server.url, cookies=operator_cookies) as http:
                await http.get(f"/c/{CONN}/streams/")  # sets the CSRF cookie a session's POST needs
                acked = await http.post(
                    "/api/v1" + digest_path(key, "groups/workers/ack"), json={"ids": [entry_id]},
                    headers={"X-CSRFToken": http.cookies.get("csrftoken", "")},
                )
                assert acked.status_code == 200, acked.text
            for _ in range(20):  # bounded: snapshot frames may come first
                frame = json.loads(await ws.recv())
                if frame["type"] == "changed":
                    return frame
        raise AssertionError("no changed frame")

    frame = run(changed())
    assert frame["action"] == "ack"
