"""Alert webhooks cannot be pointed at internal addresses: refused when a rule is saved, and refused
again when an alert is sent, on the address the name resolves to then (so a DNS answer that changes
between the two cannot swap it); an admin's allow list opens on-premise ranges; only admins see why a
delivery failed.

"Nothing connected" is decided by a real socket server on 127.0.0.1 that counts the connections the
kernel completed for it, backlog included. Name resolution is not the console's code, so DNS answers
are simulated by patching ``socket.getaddrinfo`` (every test here: a name it does not know fails to
resolve, so no test sends a DNS query or connects anywhere but 127.0.0.1).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from busconsole.env import envnetworks
from streams_app import tasks
from streams_app.alerts import egress
from streams_app.alerts.models import Alert, AlertRule
from streams_app.metrics.models import name_hash
from tests.console.alerts.helpers import RULE_POST, Kind, make_rule
from tests.console.helpers import CONN

NEW_RULE = "/alerts/rules/new/"
PUBLIC_IP = "93.184.215.14"  # a global unicast address; only ever handed out by the simulated DNS
ROOT = Path(__file__).resolve().parents[2]


class Listener:
    """An HTTP server on 127.0.0.1 that counts accepted connections and records each request's Host."""

    def __init__(self, status: int = 200, location: str = "", tls: ssl.SSLContext | None = None) -> None:
        self.accepted = 0
        self.hosts: list[str | None] = []
        self.status, self.location = status, location
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                listener.hosts.append(self.headers.get("Host"))
                self.send_response(listener.status)
                if listener.location:
                    self.send_header("Location", listener.location)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        class Server(ThreadingHTTPServer):
            def get_request(self) -> tuple[socket.socket, Any]:
                request = super().get_request()
                listener.accepted += 1
                return request

        self.server = Server(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_port
        self.url = f"http://127.0.0.1:{self.port}/hooks/T0KEN"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()
        self._closed = False

    def connections(self) -> int:
        """Stop serving and count every connection that reached the socket, the unaccepted ones too."""
        self.close()
        return self.accepted

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.server.shutdown()
        self.server.socket.setblocking(False)
        for _ in range(1000):  # connections the kernel completed that serve_forever did not accept yet
            try:
                conn, _addr = self.server.socket.accept()
            except OSError:  # BlockingIOError: the backlog is empty (a TLS socket may also fail its handshake)
                break
            conn.close()
            self.accepted += 1
        self.server.server_close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


class FakeDns:
    """``socket.getaddrinfo`` with simulated answers: numeric hosts and ``localhost`` resolve for real
    (no query leaves the machine), names in ``answers`` get those addresses, any other name fails."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.answers: dict[str, list[str]] = {}
        self.lookups: list[str] = []

    def __call__(self, host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0, flags: int = 0) -> list:  # noqa: A002
        name = host.decode() if isinstance(host, bytes) else host
        if name in self.answers:
            self.lookups.append(name)
            number = int(port or 0)
            return [
                (socket.AF_INET6, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (a, number, 0, 0)) if ":" in a
                else (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (a, number))
                for a in self.answers[name]
            ]
        if name in (None, "localhost"):
            return self.real(host, port, family, type, proto, flags)
        return self.real(host, port, family, type, proto, flags | socket.AI_NUMERICHOST)


@pytest.fixture(autouse=True)
def dns(monkeypatch: pytest.MonkeyPatch) -> FakeDns:
    fake = FakeDns(socket.getaddrinfo)
    monkeypatch.setattr(socket, "getaddrinfo", fake)
    return fake


def an_alert(rule: AlertRule) -> Alert:
    return Alert.objects.create(
        rule=rule, connection=CONN, target_key=b"orders", key_hash=name_hash(b"orders"), target_text="orders",
        target_group="billing", target_group_name=b"billing", target_hash="t", last_value=42, message="Lag 42 is above 10",
    )


def deliver(rule: AlertRule) -> Alert:
    """Open an alert of ``rule`` and run its delivery task eagerly (retries included) to the end."""
    alert = an_alert(rule)
    tasks.alert_notify.apply(args=[alert.pk])
    alert.refresh_from_db()
    return alert


def post_rule(client: Client, url: str) -> Any:
    return client.post(NEW_RULE, {**RULE_POST, "webhook_url": url})


def assert_form_error(response: Any) -> None:
    assert response.status_code == 400
    assert "webhook_url" in response.context["form"].errors
    assert not AlertRule.objects.exists()


# ------------------------------------------------------------------------------------------ at save


def test_a_loopback_webhook_is_refused_at_save(admin_client_: Client, listener: Listener) -> None:
    response = post_rule(admin_client_, listener.url)
    assert_form_error(response)
    assert "loopback" in str(response.context["form"].errors["webhook_url"])
    assert listener.connections() == 0


@pytest.mark.parametrize("url", [
    "http://user:pw@example.test/",
    "http://[::1]:80/",
    "http://0x7f000001/",
    "http://2130706433/",
    "http://localhost/",
    "http://169.254.169.254/latest/meta-data/",
    "http://[fd00:ec2::254]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://0.0.0.0:6379/",
    "http://10.1.2.3/",
    "http://172.16.0.1/",
    "http://192.168.1.1/",
    "http://100.64.0.1/",
    "http://224.0.0.1/",
    "http://[fe80::1]/",
    "http://example.com:70000/",
    "http://example.com:0/",
    "ftp://example.com/hook",
    "file:///etc/passwd",
])
def test_internal_odd_and_credentialed_webhooks_are_form_errors(admin_client_: Client, url: str) -> None:
    assert_form_error(post_rule(admin_client_, url))


def test_a_public_receiver_is_saved(admin_client_: Client, dns: FakeDns) -> None:
    dns.answers["hooks.example.test"] = [PUBLIC_IP]
    assert post_rule(admin_client_, "https://hooks.example.test/services/T00/secret").status_code == 302
    assert AlertRule.objects.get().webhook_url == "https://hooks.example.test/services/T00/secret"


def test_a_name_that_does_not_resolve_yet_is_saved_and_checked_when_sent(admin_client_: Client) -> None:
    assert post_rule(admin_client_, "https://not-yet.example.test/hook").status_code == 302


def test_the_allow_list_lets_an_on_premise_receiver_be_saved(admin_client_: Client, settings) -> None:
    settings.BUSCONSOLE_WEBHOOK_ALLOW = (ipaddress.ip_network("10.0.0.0/8"),)
    assert post_rule(admin_client_, "http://10.1.2.3:8080/hook").status_code == 302
    assert post_rule(admin_client_, "http://192.168.1.1:8080/hook").status_code == 400  # outside the list


# ------------------------------------------------------------------------------------------ at send


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


def make_certificates(directory: Path, name: str) -> tuple[Path, Path, Path]:
    """A throwaway CA (its certificate) and a server certificate and key for ``name``, made by openssl."""
    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True, timeout=60)

    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("req", "-x509", *curve, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=webhook test CA",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
    run("req", *curve, "-keyout", "server.key", "-out", "server.csr", "-subj", f"/CN={name}")
    (directory / "server.ext").write_text(
        f"subjectAltName=DNS:{name}\nbasicConstraints=CA:FALSE\nauthorityKeyIdentifier=keyid\n"
    )
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "server.pem", "-days", "2", "-extfile", "server.ext")
    return directory / "ca.pem", directory / "server.pem", directory / "server.key"


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


# ----------------------------------------------------------------------------------------- settings


def test_a_bad_allow_list_stops_the_console_at_start_up() -> None:
    env = {**os.environ, "BUSCONSOLE_WEBHOOK_ALLOW": "10.0.0.0/8, 10.0.0.1/33", "DJANGO_SETTINGS_MODULE": "busconsole.settings"}
    done = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    assert "BUSCONSOLE_WEBHOOK_ALLOW" in done.stderr and "10.0.0.1/33" in done.stderr


@pytest.mark.parametrize("text", ["10.0.0.0/8", " fd12:3456::/48 ,192.168.1.5", ""])
def test_the_allow_list_parses_cidrs(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv("BUSCONSOLE_WEBHOOK_ALLOW", text)
    expected = tuple(ipaddress.ip_network(part.strip()) for part in text.split(",") if part.strip())
    assert envnetworks("BUSCONSOLE_WEBHOOK_ALLOW") == expected


@pytest.mark.parametrize("text", ["10.0.0.1/8", "10.0.0.0/33", "example.com", "10.0.0.0/8;"])
def test_the_allow_list_refuses_anything_but_exact_cidrs(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv("BUSCONSOLE_WEBHOOK_ALLOW", text)
    with pytest.raises(ImproperlyConfigured, match="BUSCONSOLE_WEBHOOK_ALLOW"):
        envnetworks("BUSCONSOLE_WEBHOOK_ALLOW")


# ----------------------------------------------------------------------------------- the address policy

#: Addresses a webhook may not reach by default, from the IANA special-purpose registries.
DENIED_BY_DEFAULT = [
    "127.0.0.1", "127.255.255.254", "0.0.0.0", "10.0.0.1", "172.31.255.255", "192.168.0.1", "169.254.169.254",
    "169.254.1.1", "100.64.0.1", "100.127.255.255", "224.0.0.251", "239.255.255.250", "240.0.0.1",
    "255.255.255.255", "192.0.2.1", "198.18.0.1",
    "::1", "::", "fd00:ec2::254", "fc00::1", "fe80::1", "ff02::1", "ff0e::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1",
    "::ffff:169.254.169.254", "::7f00:1", "64:ff9b::7f00:1", "64:ff9b::a00:1", "2002:7f00:1::", "2002:a00:1::",
    "2001:db8::1",
]
PUBLIC = ["93.184.215.14", "8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "2a00:1450:4001:800::200e",
          "64:ff9b::808:808", "2002:808:808::"]


@pytest.mark.parametrize("address", DENIED_BY_DEFAULT)
def test_internal_addresses_are_refused_by_default(address: str) -> None:
    assert egress.address_problem(ipaddress.ip_address(address), ()) is not None


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_are_allowed(address: str) -> None:
    assert egress.address_problem(ipaddress.ip_address(address), ()) is None


def test_the_allow_list_opens_exactly_its_ranges() -> None:
    allow = (ipaddress.ip_network("10.1.0.0/16"), ipaddress.ip_network("fd12:3456::/48"))
    for opened in ("10.1.2.3", "::ffff:10.1.2.3", "fd12:3456::1"):
        assert egress.address_problem(ipaddress.ip_address(opened), allow) is None, opened
    for closed in ("10.2.0.1", "127.0.0.1", "fd12:3457::1", "169.254.169.254"):
        assert egress.address_problem(ipaddress.ip_address(closed), allow) is not None, closed


def test_every_address_of_a_name_is_checked_not_just_the_first(dns: FakeDns) -> None:
    dns.answers["mixed.example.test"] = [PUBLIC_IP, "2606:4700:4700::1111", "10.0.0.7"]
    with pytest.raises(egress.WebhookRefused, match="10.0.0.7"):
        egress.addresses_checked("mixed.example.test", 443, ())
    dns.answers["mixed.example.test"] = [PUBLIC_IP, "2606:4700:4700::1111"]
    assert [str(a) for a in egress.addresses_checked("mixed.example.test", 443, ())] == [PUBLIC_IP, "2606:4700:4700::1111"]
