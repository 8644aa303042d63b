"""Production settings (``DEBUG=0``): Django's deployment checks pass and responses carry HSTS and the CSP.

Each runs in a fresh process with the environment a deployment sets, because the settings module reads
the environment once at import: the test process's own settings are the development ones.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOST = "console.example.com"

# What a production response must say, written out here rather than read from settings.py.
HSTS = "max-age=31536000; includeSubDomains; preload"
CSP = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "img-src": "'self'",
    "connect-src": "'self'",
    "object-src": "'none'",
    "base-uri": "'self'",
    "frame-ancestors": "'none'",
    "form-action": "'self'",
}

PROBE = f"""
import json
import django
django.setup()
from django.test import Client
response = Client().get("/healthz", secure=True, headers={{"host": "{HOST}"}})
print(json.dumps({{"status": response.status_code, "hsts": response.get("Strict-Transport-Security"),
                  "csp": response.get("Content-Security-Policy")}}))
"""


def production(*args: str) -> subprocess.CompletedProcess[str]:
    """Run Python in the repository with production settings: DEBUG=0, a real secret, one host."""
    env = {
        **os.environ,
        "DEBUG": "0",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": HOST,
        "DJANGO_SETTINGS_MODULE": "busconsole.settings",
    }
    for name in ("SECURE_HSTS_SECONDS", "SECURE_HSTS_PRELOAD", "SECURE_SSL_REDIRECT"):
        env.pop(name, None)  # the defaults are what is under test
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_check_deploy_is_clean_with_debug_off() -> None:
    done = production("manage.py", "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "System check identified no issues (0 silenced).", done.stdout + done.stderr


@pytest.mark.slow
def test_production_responses_carry_hsts_and_a_strict_csp() -> None:
    done = production("-c", PROBE)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["status"] == 200
    assert answer["hsts"] == HSTS
    policy = dict(d.strip().split(" ", 1) for d in (answer["csp"] or "").split(";") if d.strip())
    assert policy == CSP
