"""Production settings (``DEBUG=0``) in a fresh process: the settings module reads the environment once at
import, and the test process's own settings are the development ones.

:func:`production_env` is the environment a deployment sets (a real secret, one host, the suite's Redis
and, when given, the test database); :func:`probe` runs Django's test client in such a process and
returns each answer's status and headers; :class:`WebProcess` starts the web server as the image does.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"


def production_env(*, database: str | None = None, static_root: Path | None = None, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "DEBUG": "0",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": HOST,
        "DJANGO_SETTINGS_MODULE": "busconsole.settings",
    }
    for name in ("SECURE_SSL_REDIRECT", "CSRF_TRUSTED_ORIGINS", "USE_X_FORWARDED_HOST", "STATIC_ROOT"):
        env.pop(name, None)  # the defaults unless a test sets them
    if database is not None:
        env["DATABASE_URL"] = f"sqlite:///{database}"
    if static_root is not None:
        env["STATIC_ROOT"] = str(static_root)
    env.update(extra)
    return env


_PROBE = """
import json, sys
import django
django.setup()
from django.test import Client
client = Client()
out = []
for method, path, headers, secure in json.loads(sys.argv[1]):
    response = getattr(client, method)(path, headers=headers, secure=secure)
    out.append({"status": response.status_code, "location": response.get("Location"),
                "hsts": response.get("Strict-Transport-Security")})
print(json.dumps(out))
"""


def probe(env: dict[str, str], *requests: tuple[str, str, dict[str, str], bool]) -> list[dict]:
    """(method, path, headers, secure) requests through Django's test client in a production process."""
    done = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(requests)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def python(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


class WebProcess:
    """The console's web server as the image runs it (Dockerfile's CMD), on 127.0.0.1 and a free port."""

    def __init__(self, env: dict[str, str], *extra: str) -> None:
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.env = env
        self.argv = [sys.executable, "-m", "uvicorn", "busconsole.asgi:application", "--host", HOST,
                     "--port", str(self.port), "--ws", "websockets", "--ws-per-message-deflate", "false",
                     "--log-level", "warning", *extra]
        self.process: subprocess.Popen | None = None

    def start(self) -> WebProcess:
        self.process = subprocess.Popen(self.argv, cwd=ROOT, env=self.env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"uvicorn exited {self.process.returncode}: {self.process.stderr.read()[-3000:]}")
            try:
                httpx.get(f"{self.url}/healthz", headers={"X-Forwarded-Proto": "https"}, timeout=2)
                return self
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise RuntimeError("uvicorn did not answer") from None
                time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.process = None


def collectstatic(env: dict[str, str], root: Path) -> None:
    done = python({**env, "STATIC_ROOT": str(root)}, "manage.py", "collectstatic", "--noinput")
    assert done.returncode == 0, done.stderr[-3000:]
    assert (root / "staticfiles.json").exists(), f"collectstatic did not write to STATIC_ROOT={root}"
