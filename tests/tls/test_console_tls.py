"""The console over TLS to a monitored Redis that requires client certificates (``tls-auth-clients yes``).

One ``rediss://`` URL with ``ssl_ca_certs``, ``ssl_certfile`` and ``ssl_keyfile`` (eventbus/tls.py) carries
the pages, the API and the live tail's connections; the server's certificate is verified, and so is its
name. What the console shows is compared with what Redis holds, read on the server's plain port.

Each way TLS can fail (a CA that did not sign the server's certificate, an expired certificate, one that
names another host, no client certificate, one of another CA) is a 503 page or JSON error naming the TLS
problem, fast: the handshake fails at once, and connecting is bounded by the console's timeouts.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading

import pytest
import redis
from django.test import Client

from streams_app.redis_ops import client as redis_client
from streams_app.redis_ops.tail import TailReader
from tests.console.helpers import CONN, api, group_url, stream_api, stream_url
from tests.servers import TlsRedisServer
from tests.tls.conftest import client_params
from tests.tls.pki import Pki


@pytest.fixture
def on_tls(settings, tls_server: TlsRedisServer, pki: Pki, plain: redis.Redis) -> str:
    plain.xadd("orders", {"n": "1"})
    plain.xadd("orders", {"n": "2"})
    plain.xgroup_create("orders", "workers", id="0")
    plain.xreadgroup("workers", "c1", {"orders": ">"}, count=1)
    url = tls_server.tls_url(0, **client_params(pki))
    settings.BUS_REDIS_URLS = {CONN: url}
    redis_client.reset()
    return url


def test_pages_and_api_read_over_mutual_tls(on_tls: str, plain: redis.Redis, viewer_client: Client) -> None:
    for path in ("/", f"/c/{CONN}/streams/", stream_url("orders"), group_url("orders", "workers")):
        page = viewer_client.get(path)
        assert page.status_code == 200, (path, page.content[:300])
        assert "unreachable" not in page.content.decode(), path
    listed = viewer_client.get(api("/connections/")).json()["connections"]
    assert [(c["name"], c["ok"]) for c in listed] == [(CONN, True)]
    assert listed[0]["redis_version"] == plain.info("server")["redis_version"]
    entries = viewer_client.get(stream_api("orders", "entries/"), {"order": "asc"}).json()["entries"]
    assert [e["id"] for e in entries] == [entry_id.decode() for entry_id, _ in plain.xrange("orders")]
    pending = viewer_client.get(stream_api("orders", "groups/workers/pending/")).json()
    assert pending["summary"]["count"] == plain.xpending("orders", "workers")["pending"] == 1


def test_actions_over_mutual_tls(on_tls: str, plain: redis.Redis, operator_client: Client) -> None:
    [(pending_id, _)] = plain.xrange("orders", count=1)
    acked = operator_client.post(stream_api("orders", "groups/workers/ack"), {"ids": [pending_id.decode()]},
                                 content_type="application/json")
    assert acked.status_code == 200, acked.content
    assert acked.json()["acked"] == 1
    assert plain.xpending("orders", "workers")["pending"] == 0


def test_the_live_tail_reads_over_mutual_tls(on_tls: str, plain: redis.Redis) -> None:
    newest = plain.xrevrange("orders", count=1)[0][0].decode()

    async def read() -> tuple[str, list]:
        reader = TailReader(CONN)
        try:
            seen = await reader.newest_id(b"orders")
            await reader.connect_reader(block_ms=10)
            added = plain.xadd("orders", {"n": "3"})
            reply = await reader.read([b"orders"], [newest], count=10, block_ms=1000)
            assert added
            return seen, reply
        finally:
            await reader.aclose()

    seen, reply = asyncio.run(read())
    assert seen == newest
    [(key, entries)] = reply
    assert key == b"orders" and [fields for _, fields in entries] == [[b"n", b"3"]]


def test_the_server_name_is_checked_by_default(settings, tls_server: TlsRedisServer, pki: Pki, plain,
                                               viewer_client: Client) -> None:
    """``localhost`` is one of the certificate's names; the URL need not ask for the check."""
    settings.BUS_REDIS_URLS = {CONN: tls_server.tls_url(0, host="localhost", **client_params(pki))}
    assert viewer_client.get(api("/connections/")).json()["connections"][0]["ok"] is True


def _failures(pki: Pki, tls_server: TlsRedisServer, expired_server: TlsRedisServer,
              wrong_name_server: TlsRedisServer) -> dict[str, tuple[str, str]]:
    """Each failing URL and a phrase its error must hold."""
    good = client_params(pki)
    stranger = {"ssl_ca_certs": str(pki.ca), "ssl_certfile": str(pki.stranger.cert),
                "ssl_keyfile": str(pki.stranger.key)}
    return {
        "wrong CA": (tls_server.tls_url(0, **client_params(pki, ca=pki.other_ca)), "not signed by a trusted CA"),
        "expired": (expired_server.tls_url(0, **good), "has expired"),
        "hostname mismatch": (wrong_name_server.tls_url(0, **good), "does not name this host"),
        "no client certificate": (tls_server.tls_url(0, **client_params(pki, cert=False)), "client certificate"),
        "client certificate of another CA": (tls_server.tls_url(0, **stranger), "client certificate"),
    }


@pytest.mark.parametrize("case", ["wrong CA", "expired", "hostname mismatch", "no client certificate",
                                  "client certificate of another CA"])
def test_each_tls_failure_is_a_503_naming_it(settings, case: str, pki: Pki, tls_server: TlsRedisServer,
                                             expired_server: TlsRedisServer, wrong_name_server: TlsRedisServer,
                                             plain: redis.Redis, viewer_client: Client) -> None:
    url, phrase = _failures(pki, tls_server, expired_server, wrong_name_server)[case]
    plain.xadd("orders", {"n": "1"})
    settings.BUS_REDIS_URLS = {CONN: url}

    answer = viewer_client.get(stream_api("orders"))
    assert answer.status_code == 503, answer.content
    error = answer.json()["error"]
    assert error["code"] == "tls_error", error
    assert "TLS" in error["message"] and phrase in error["message"], error["message"]

    page = viewer_client.get(stream_url("orders"))
    assert page.status_code == 503
    assert phrase in page.content.decode()

    listed = viewer_client.get(api("/connections/")).json()["connections"]
    assert listed[0]["ok"] is False and phrase in listed[0]["error"], listed
    overview = viewer_client.get("/")
    assert overview.status_code == 200 and phrase in overview.content.decode()


def test_a_server_that_never_answers_the_handshake_is_a_bounded_503(settings, pki: Pki,
                                                                    viewer_client: Client) -> None:
    """A port that accepts and then says nothing (a TLS terminator with no backend, a firewall that drops):
    the handshake waits at most the console's Redis timeout, then a 503; never a hung request."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                held.append(listener.accept()[0])  # and never a byte back

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    port = listener.getsockname()[1]
    settings.BUSCONSOLE_REDIS_TIMEOUT = 0.5
    settings.BUS_REDIS_URLS = {CONN: f"rediss://127.0.0.1:{port}/0?" + "&".join(
        f"{k}={v}" for k, v in client_params(pki).items())}
    try:
        answer = viewer_client.get(stream_api("orders"))
    finally:
        stop.set()
        thread.join(5)
        for sock in held:
            sock.close()
        listener.close()
    assert answer.status_code == 503, answer.content
    assert answer.json()["error"]["code"] == "unreachable"
    assert held, "the console never connected"
