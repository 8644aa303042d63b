"""Which addresses an alert webhook may reach: the IANA special-purpose ranges are refused by default,
public addresses are allowed, every address of a name is checked, and ``BUSCONSOLE_WEBHOOK_ALLOW`` (exact
CIDRs only, or the console does not start) opens exactly its ranges.
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from busconsole.env import envnetworks
from streams_app.alerts import egress
from tests.security.webhook_ssrf.helpers import PUBLIC_IP, FakeDns
from tests.servers import REPO


def test_a_bad_allow_list_stops_the_console_at_start_up() -> None:
    env = {**os.environ, "BUSCONSOLE_WEBHOOK_ALLOW": "10.0.0.0/8, 10.0.0.1/33", "DJANGO_SETTINGS_MODULE": "busconsole.settings"}
    done = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
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
