"""Debian's nginx with the shipped ``deploy/nginx/busconsole.conf``, on free ports in a temporary directory.

The shipped file is used as it is, but for what only this machine decides: the listen ports (two free
ports of 127.0.0.1 for its http and https servers, IPv6 dropped), the upstream's port (the console's
server under test), a self-signed certificate made here with ``openssl`` for 127.0.0.1, and the static
root. Each replaced line must be found exactly as written in the file, so a change to the shipped file
that this harness no longer fits fails loudly instead of testing something else. nginx runs in the
foreground (``daemon off``) as this test's child, with its pid, logs and temporary files in the directory.
"""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
from pathlib import Path

from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "deploy" / "nginx" / "busconsole.conf"

MAIN = """\
daemon off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
{user}
events {{ worker_connections 256; }}
http {{
    # What Debian's /etc/nginx/nginx.conf sets around the files it includes from conf.d/.
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    sendfile on;
    tcp_nopush on;
    gzip on;
    access_log {dir}/access.log;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    include {dir}/busconsole.conf;
}}
"""


def nginx_binary() -> str:
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    if found is None:
        raise RuntimeError("nginx is not installed: run `make setup` (installs Debian's nginx)")
    return found


def replace_once(text: str, old: str, new: str) -> str:
    count = text.count(old)
    assert count == 1, f"deploy/nginx/busconsole.conf: expected {old!r} once, found it {count} times"
    return text.replace(old, new)


class Nginx:
    def __init__(self, *, upstream_port: int, static_root: Path) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="busconsole-nginx-"))
        self.http_port = free_port()
        self.https_port = free_port()
        self.upstream_port = upstream_port
        self.static_root = static_root
        self.url = f"https://127.0.0.1:{self.https_port}"
        self.cert = self.directory / "cert.pem"
        self.process: subprocess.Popen | None = None

    def config(self) -> str:
        text = SHIPPED.read_text()
        text = replace_once(text, "server 127.0.0.1:8000;", f"server 127.0.0.1:{self.upstream_port};")
        text = replace_once(text, "    listen 80;\n", f"    listen 127.0.0.1:{self.http_port};\n")
        text = replace_once(text, "    listen 443 ssl;\n", f"    listen 127.0.0.1:{self.https_port} ssl;\n")
        text = replace_once(text, "    listen [::]:80;\n", "")
        text = replace_once(text, "    listen [::]:443 ssl;\n", "")
        text = replace_once(text, "/etc/ssl/certs/console.example.com.pem", str(self.cert))
        text = replace_once(text, "/etc/ssl/private/console.example.com.key", str(self.directory / "key.pem"))
        return replace_once(text, "alias /app/staticfiles/;", f"alias {self.static_root}/;")

    def _certificate(self) -> None:
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
             "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(self.directory / "key.pem"),
             "-out", str(self.cert)],
            check=True, capture_output=True, timeout=60,
        )

    def ssl_context(self) -> ssl.SSLContext:
        """A client context trusting only this server's certificate."""
        return ssl.create_default_context(cafile=str(self.cert))

    def start(self) -> Nginx:
        self._certificate()
        (self.directory / "busconsole.conf").write_text(self.config())
        # As root, nginx's workers would run as nobody, who cannot enter this 0700 directory.
        user = "user root root;" if os.geteuid() == 0 else ""
        main = self.directory / "nginx.conf"
        main.write_text(MAIN.format(dir=self.directory, user=user))
        binary = nginx_binary()
        argv = [binary, "-p", str(self.directory), "-e", str(self.directory / "error.log"), "-c", str(main)]
        checked = subprocess.run([*argv, "-t"], capture_output=True, text=True, timeout=30)
        assert checked.returncode == 0, f"nginx -t refused the configuration:\n{checked.stderr}"
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 15
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"nginx exited {self.process.returncode}: {self.process.stderr.read()}")
            try:
                with socket.create_connection(("127.0.0.1", self.https_port), timeout=0.2):
                    return self
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"nginx did not listen: {self.log()}") from None
                time.sleep(0.05)

    def log(self) -> str:
        path = self.directory / "error.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()  # SIGTERM: fast shutdown of the master and its worker
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.process = None
        shutil.rmtree(self.directory, ignore_errors=True)
