"""Stream keys too long for an HTTP request line (a 22 KB binary key percent-encodes past uvicorn's 64 KiB
request target): they are listed with a ``~sha256:<digest>`` link within a 4 KiB budget, which resolves
from the listing or from the mirror for the pages, the API, the live tail and the page's stream-events
socket; an unknown digest is a 404 that says so, an anonymous one goes to the login with the short path,
and short keys keep their plain links.

Real redis-server and a real uvicorn; digests come from ``hashlib.sha256``, paths from ``urllib``'s ``quote``.
"""

from __future__ import annotations

import hashlib
import json
import socket
import uuid
from urllib.parse import quote

import httpx
import pytest
import redis
from django.test import Client
from websockets.asyncio.client import connect

from streams_app.metrics import mirror
from tests.conftest import AsgiServer, session_cookie
from tests.console.helpers import CONN, api
from tests.console.live.helpers import cookie_header, entries_of, run, until_live


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
                mirror.mirror_sync(conn=CONN)
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
    mirror.mirror_sync(conn=CONN)
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
