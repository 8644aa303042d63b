"""What an operator behind a reverse proxy trips on with ``DEBUG=0``, each checked in a production process.

- Probes (a load balancer, Docker, Kubernetes) ask ``/healthz`` and ``/readyz`` over plain HTTP on the
  web process itself, without X-Forwarded-Proto: they are answered, not redirected to https, while every
  other address still is.
- ``CSRF_TRUSTED_ORIGINS`` entries need a scheme; one without is refused at start-up with the reason
  (uvicorn runs no system checks, and Django would otherwise match nothing: every login fails CSRF).
- A proxy that sends its upstream's name as Host and the public one as X-Forwarded-Host works with
  ``USE_X_FORWARDED_HOST=1`` (off by default: without such a proxy a client could choose the host).
"""

from __future__ import annotations

import pytest
from django.conf import settings

from tests.deploy.production import HOST, probe, production_env, python


@pytest.mark.slow
def test_probes_are_answered_over_plain_http_and_pages_redirected(db, static_root) -> None:
    env = production_env(database=settings.DATABASES["default"]["NAME"], static_root=static_root)
    plain = {"host": HOST}
    healthz, readyz, login, forwarded = probe(
        env,
        ("get", "/healthz", plain, False),
        ("get", "/readyz", plain, False),
        ("get", "/login/", plain, False),
        ("get", "/login/", {**plain, "X-Forwarded-Proto": "https"}, False),
    )
    assert healthz["status"] == 200, healthz
    assert readyz["status"] == 200, readyz
    assert login["status"] == 301 and login["location"] == f"https://{HOST}/login/"
    assert forwarded["status"] == 200 and forwarded["hsts"]  # X-Forwarded-Proto: https is secure


@pytest.mark.slow
def test_a_csrf_trusted_origin_without_a_scheme_is_refused_at_start() -> None:
    env = production_env(CSRF_TRUSTED_ORIGINS="https://console.example.com,console.example.com")
    done = python(env, "-c", "import django; django.setup()")
    assert done.returncode != 0
    assert "ImproperlyConfigured" in done.stderr
    assert "CSRF_TRUSTED_ORIGINS" in done.stderr and "'console.example.com'" in done.stderr
    ok = python(production_env(CSRF_TRUSTED_ORIGINS="https://console.example.com"), "-c", "import django; django.setup()")
    assert ok.returncode == 0, ok.stderr


@pytest.mark.slow
def test_x_forwarded_host_is_used_only_when_switched_on(db, static_root) -> None:
    upstream = {"host": "busconsole", "X-Forwarded-Host": HOST, "X-Forwarded-Proto": "https"}
    database = settings.DATABASES["default"]["NAME"]
    (off,) = probe(production_env(database=database, static_root=static_root), ("get", "/login/", upstream, False))
    (on,) = probe(production_env(database=database, static_root=static_root, USE_X_FORWARDED_HOST="1"),
                  ("get", "/login/", upstream, False))
    assert off["status"] == 400  # "busconsole" is not in ALLOWED_HOSTS
    assert on["status"] == 200
