"""Alert webhooks are checked again when an alert is sent, on the address the name resolves to then, so a
DNS answer that changes between the save and the send cannot swap it; the checked address is the one
connected to (the request keeps its own Host, HTTPS is verified against the URL's name), a redirect is
not followed, and only admins see why a delivery failed.
"""

from __future__ import annotations

import ipaddress
import ssl
from pathlib import Path

import pytest
from django.test import Client

from streams_app.alerts.models import Alert, AlertRule
from tests.console.alerts.helpers import Kind, make_rule
from tests.security.webhook_ssrf.helpers import (
    PUBLIC_IP,
    FakeDns,
    Listener,
    an_alert,
    deliver,
    make_certificates,
    post_rule,
)


def test_a_loopback_webhook_stored_anyway_is_refused_at_send_without_connecting(db, listener: Listener) -> None:
    rule = make_rule(Kind.GROUP_LAG_ABOVE, threshold=10, for_seconds=60, webhook_url=listener.url)
    alert = deliver(rule)
    assert listener.connections() == 0
    assert alert.notified_state == "" and alert.notified_at is None
    assert "127.0.0.1" in alert.notify_error and "loopback" in alert.notify_error
    assert "T0KEN" not in alert.notify_error
    assert alert.notify_attempts == 1  # a refusal is final: retrying cannot change the answer


@pytest.mark.parametrize("url", [
    "http://0x7f000001:{port}/",
    "http://2130706433:{port}/",
    "http://localhost:{port}/",
    "http://[::ffff:127.0.0.1]:{port}/",
    "http://user:pw@127.0.0.1:{port}/",
])
def test_other_spellings_of_loopback_stored_anyway_are_refused_at_send(db, listener: Listener, url: str) -> None:
    alert = deliver(make_rule(Kind.GROUP_LAG_ABOVE, webhook_url=url.format(port=listener.port)))
    assert listener.connections() == 0
    assert alert.notified_state == "" and alert.notify_error


def test_a_name_whose_answer_turns_to_loopback_after_the_save_is_refused_at_send(
    admin_client_: Client, listener: Listener, dns: FakeDns
) -> None:
    dns.answers["hooks.example.test"] = [PUBLIC_IP]
    assert post_rule(admin_client_, f"http://hooks.example.test:{listener.port}/hook").status_code == 302
    dns.answers["hooks.example.test"] = ["127.0.0.1", PUBLIC_IP]  # the DNS answer changes after the save

    alert = deliver(AlertRule.objects.get())

    assert listener.connections() == 0
    assert alert.notified_state == "" and "loopback" in alert.notify_error


def test_a_stored_out_of_range_port_neither_breaks_the_page_nor_is_sent(db, admin_client_: Client) -> None:
    rule = make_rule(Kind.GROUP_LAG_ABOVE, webhook_url="http://example.com:70000/hook")
    alert = deliver(rule)
    assert alert.notified_state == "" and "port" in alert.notify_error
    assert admin_client_.get("/alerts/").status_code == 200


def test_an_allowed_name_is_posted_to_the_checked_address_with_its_own_host(
    db, settings, listener: Listener, dns: FakeDns
) -> None:
    """The allow list opens 127.0.0.1; the request still names the receiver's host, not the address."""
    settings.BUSCONSOLE_WEBHOOK_ALLOW = (ipaddress.ip_network("127.0.0.1/32"),)
    dns.answers["hooks.internal.test"] = ["127.0.0.1"]
    alert = deliver(make_rule(Kind.GROUP_LAG_ABOVE, webhook_url=f"http://hooks.internal.test:{listener.port}/hook"))
    assert alert.notified_state == "open" and alert.notify_error == ""
    assert listener.hosts == [f"hooks.internal.test:{listener.port}"]
    assert dns.lookups == ["hooks.internal.test"]  # resolved once, and the connection went to that answer


def test_a_redirect_is_not_followed(db, settings) -> None:
    settings.BUSCONSOLE_WEBHOOK_ALLOW = (ipaddress.ip_network("127.0.0.1/32"),)
    target = Listener()
    first = Listener(status=307, location=target.url)
    try:
        alert = deliver(make_rule(Kind.GROUP_LAG_ABOVE, webhook_url=first.url))
        assert first.connections() >= 1 and target.connections() == 0
        assert alert.notified_state == "" and "307" in alert.notify_error
    finally:
        first.close()
        target.close()


def test_https_is_verified_against_the_urls_name_while_connecting_to_the_checked_address(
    db, settings, dns: FakeDns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The certificate names ``hooks.tls.test``; the connection goes to 127.0.0.1, the name it resolved
    to, and the server name sent (SNI) and verified is still the URL's: another name on the same
    address fails verification."""
    ca, certificate, key = make_certificates(tmp_path, "hooks.tls.test")
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))  # httpx trusts this CA instead of the public ones
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(certificate, key)
    names: list[str | None] = []
    server_context.sni_callback = lambda _sock, name, _ctx: names.append(name)
    settings.BUSCONSOLE_WEBHOOK_ALLOW = (ipaddress.ip_network("127.0.0.1/32"),)
    dns.answers["hooks.tls.test"] = ["127.0.0.1"]
    dns.answers["other.tls.test"] = ["127.0.0.1"]
    server = Listener(tls=server_context)
    try:
        sent = deliver(make_rule(Kind.GROUP_LAG_ABOVE, webhook_url=f"https://hooks.tls.test:{server.port}/hook"))
        wrong = deliver(make_rule(Kind.GROUP_LAG_ABOVE, name="wrong", webhook_url=f"https://other.tls.test:{server.port}/hook"))
    finally:
        server.close()
    assert sent.notified_state == "open" and server.hosts == [f"hooks.tls.test:{server.port}"]
    assert names[0] == "hooks.tls.test"
    assert wrong.notified_state == "" and wrong.notify_error.startswith("ConnectError")


# ------------------------------------------------------------------------------------- who sees why


def test_delivery_error_detail_is_shown_to_admins_only(
    db, viewer_client: Client, operator_client: Client, admin_client_: Client
) -> None:
    rule = make_rule(Kind.GROUP_LAG_ABOVE, webhook_url="https://hooks.example.test/hook")
    alert = an_alert(rule)
    detail = "ConnectError posting to http://10.9.8.7:6379/"
    Alert.objects.filter(pk=alert.pk).update(notify_error=detail, notify_attempts=3)

    for client in (viewer_client, operator_client):
        page = client.get("/alerts/").content.decode()
        assert "ConnectError" not in page and "10.9.8.7" not in page
        assert "delivery failed" in page
    assert detail in admin_client_.get("/alerts/").content.decode()
