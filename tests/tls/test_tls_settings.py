"""TLS is configured one way, on the URL (eventbus/tls.py), and a URL whose TLS parameters cannot work is
refused when the settings are read, naming the variable and the parameter: a misspelt parameter, one on a
``redis://`` URL, a value out of range, a file that is not there, a certificate without its key.

``REDIS_URL`` is checked in a fresh interpreter, as the web and Celery processes read it at start-up.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from busconsole.env import parse_connections
from tests.servers import REPO
from tests.tls.pki import Pki


def bad_urls(pki: Pki) -> dict[str, str]:
    """Each URL whose TLS cannot work, and a word its refusal must hold."""
    return {
        f"rediss://127.0.0.1:6380/0?ssl_ca_cert={pki.ca}": "ssl_ca_cert",  # the s is missing
        f"redis://127.0.0.1:6380/0?ssl_ca_certs={pki.ca}": "rediss://",
        "rediss://127.0.0.1:6380/0?ssl_ca_certs=/no/such/ca.pem": "/no/such/ca.pem",
        "rediss://127.0.0.1:6380/0?ssl_cert_reqs=sometimes": "sometimes",
        "rediss://127.0.0.1:6380/0?ssl_check_hostname=perhaps": "perhaps",
        f"rediss://127.0.0.1:6380/0?ssl_certfile={pki.client.cert}": "ssl_keyfile",
    }


def test_bus_redis_urls_refuses_tls_parameters_that_cannot_work(pki: Pki) -> None:
    for url, word in bad_urls(pki).items():
        with pytest.raises(ImproperlyConfigured) as refused:
            parse_connections(f"prod={url}")
        assert "BUS_REDIS_URLS" in str(refused.value) and "prod" in str(refused.value), url
        assert word in str(refused.value), (url, str(refused.value))


def test_bus_redis_urls_takes_a_complete_tls_url(pki: Pki) -> None:
    url = (f"rediss://ops:pw@127.0.0.1:6380/0?ssl_ca_certs={pki.ca}&ssl_certfile={pki.client.cert}"
           f"&ssl_keyfile={pki.client.key}&ssl_cert_reqs=required&ssl_check_hostname=true")
    assert parse_connections(f"prod={url}") == {"prod": url}


def _settings(**env: str) -> subprocess.CompletedProcess[str]:
    code = "import django; django.setup(); print('started')"
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "busconsole.settings", "PYTHONPATH": str(REPO), **env}
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=environment, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.slow
def test_redis_url_with_tls_that_cannot_work_stops_start_up(pki: Pki) -> None:
    for url, word in list(bad_urls(pki).items())[:3]:
        done = _settings(REDIS_URL=url)
        assert done.returncode != 0 and "started" not in done.stdout, (url, done.stdout)
        last = done.stderr.strip().splitlines()[-1]
        assert "ImproperlyConfigured" in last and "REDIS_URL" in last and word in last, last
