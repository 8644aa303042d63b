"""The event bus and ``python -m eventbus`` over TLS with a client certificate, configured by the URL alone.

A worker handles what is published over TLS; the command line lists the streams Redis holds (read here
on the server's plain port). Each TLS failure (wrong CA, expired certificate, another host's name, no
client certificate) is one line naming it and exit 69, never a traceback nor a hang; TLS parameters that
cannot work are one line and exit 2, before connecting.
"""

from __future__ import annotations

import json
import socket

import pytest
import redis

from eventbus import Bus
from tests.eventbus.conftest import running
from tests.eventbus.test_cli_urls import cli, one_line
from tests.polling import wait_for
from tests.servers import TlsRedisServer
from tests.tls.conftest import client_params
from tests.tls.pki import Pki


def test_a_worker_handles_events_published_over_tls(tls_server: TlsRedisServer, pki: Pki, plain: redis.Redis) -> None:
    bus = Bus.from_url(tls_server.tls_url(0, **client_params(pki)), maxlen=None)
    handled: list[dict] = []
    bus.on("order.created", stream="orders", group="billing")(lambda event: handled.append(event.data))
    try:
        bus.ensure_groups()
        entry_id = bus.publish("orders", "order.created", {"order_id": 7})
        with running(bus):
            wait_for(lambda: handled and plain.xpending("orders", "billing")["pending"] == 0, timeout=20,
                     what="the handler to run and its entry to be acked")
        assert handled == [{"order_id": 7}]
        assert [i.decode() for i, _ in plain.xrange("orders")] == [entry_id]
    finally:
        bus.close()


@pytest.mark.slow
def test_the_command_line_lists_over_tls(tls_server: TlsRedisServer, pki: Pki, plain: redis.Redis) -> None:
    plain.xadd("orders", {"type": "order.created", "data": "{}"})
    plain.xadd("payments", {"type": "payment.taken", "data": "{}"})
    done = cli("list", "--json", "--url", tls_server.tls_url(0, **client_params(pki)))
    assert done.returncode == 0, done.stderr
    assert sorted(row["key"] for row in json.loads(done.stdout)["streams"]) == ["orders", "payments"]
    url = tls_server.tls_url(0, host="localhost", **client_params(pki))  # a name the certificate holds
    assert cli("list", BUS_REDIS_URL=url).returncode == 0


@pytest.mark.parametrize("case", ["wrong CA", "expired", "hostname mismatch", "no client certificate"])
def test_each_tls_failure_is_one_line_and_exit_69(case: str, pki: Pki, tls_server: TlsRedisServer,
                                                  expired_server: TlsRedisServer,
                                                  wrong_name_server: TlsRedisServer) -> None:
    good = client_params(pki)
    url, phrase = {
        "wrong CA": (tls_server.tls_url(0, **client_params(pki, ca=pki.other_ca)), "not signed by a trusted CA"),
        "expired": (expired_server.tls_url(0, **good), "has expired"),
        "hostname mismatch": (wrong_name_server.tls_url(0, **good), "does not name this host"),
        "no client certificate": (tls_server.tls_url(0, **client_params(pki, cert=False)), "client certificate"),
    }[case]
    line = one_line(cli("list", "--url", url), status=69)
    assert "TLS" in line and phrase in line and "--url" in line, line


def test_tls_parameters_that_cannot_work_are_exit_2(tls_server: TlsRedisServer, pki: Pki) -> None:
    line = one_line(cli("list", "--url", tls_server.tls_url(0, ssl_ca_cert=str(pki.ca))), status=2)
    assert "ssl_ca_cert" in line and "--url" in line, line


@pytest.mark.slow
def test_a_server_that_never_answers_the_handshake_is_exit_69_not_a_hang(pki: Pki) -> None:
    """A port that accepts and says nothing: the TLS handshake waits at most $EVENTBUS_TIMEOUT_S."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    try:
        url = f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={pki.ca}"
        line = one_line(cli("list", "--url", url, EVENTBUS_TIMEOUT_S="1"), status=69)  # the backlog accepts
    finally:
        listener.close()
    assert "did not answer in time" in line and "--url" in line, line


def test_the_command_timeout_must_be_a_number(tls_server: TlsRedisServer, pki: Pki) -> None:
    line = one_line(cli("list", "--url", tls_server.tls_url(0, **client_params(pki)), EVENTBUS_TIMEOUT_S="soon"))
    assert "EVENTBUS_TIMEOUT_S" in line and "soon" in line, line
