"""What the webhook SSRF tests share: a counting HTTP listener on 127.0.0.1, simulated DNS answers, and
helpers that open an alert and deliver it, post a rule, and make throwaway TLS certificates.

"Nothing connected" is decided by a real socket server on 127.0.0.1 that counts the connections the
kernel completed for it, backlog included. Name resolution is not the console's code, so DNS answers
are simulated by patching ``socket.getaddrinfo`` (:class:`FakeDns`; this directory's conftest does it
for every test: a name it does not know fails to resolve, so no test sends a DNS query or connects
anywhere but 127.0.0.1).
"""

from __future__ import annotations

import socket
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from django.test import Client

from streams_app import tasks
from streams_app.alerts.models import Alert, AlertRule
from streams_app.metrics.models import name_hash
from tests.console.alerts.helpers import RULE_POST
from tests.console.helpers import CONN

NEW_RULE = "/alerts/rules/new/"
PUBLIC_IP = "93.184.215.14"  # a global unicast address; only ever handed out by the simulated DNS


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
        # A short poll: shutdown() waits for serve_forever's next poll (0.5 s by default) at every close.
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
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
