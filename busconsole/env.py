"""Typed readers for settings taken from environment variables.

Each fails loudly on a value it cannot parse: a typo in production config must stop the
process at start-up, not quietly fall back to a default.
"""

from __future__ import annotations

import os
from ipaddress import IPv4Network, IPv6Network, ip_network
from urllib.parse import parse_qsl, urlsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def envstr(name: str, default: str) -> str:
    return os.environ.get(name, default)


def envbool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be 0 or 1, not {raw!r}")


def envint(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, not {raw!r}") from None


def envlist(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def envnetworks(name: str) -> tuple[IPv4Network | IPv6Network, ...]:
    """CIDRs separated by commas (``10.0.0.0/8, fd12:3456::/48``; a bare address is one host).

    A range with host bits set (``10.0.0.1/8``) is refused rather than widened: it is usually a typo
    for another range, and an allow list must mean exactly what it says.
    """
    networks: list[IPv4Network | IPv6Network] = []
    for item in envlist(name, []):
        try:
            networks.append(ip_network(item))
        except ValueError as exc:
            raise ImproperlyConfigured(f"{name}: {item!r} is not a CIDR range ({exc})") from None
    return tuple(networks)


def parse_connections(raw: str) -> dict[str, str]:
    """Parse ``BUS_REDIS_URLS``: ``name=url`` pairs separated by commas."""
    connections: dict[str, str] = {}
    for item in raw.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, url = item.partition("=")
        name, url = name.strip(), url.strip()
        if not sep or not name or not url:
            raise ImproperlyConfigured(f"BUS_REDIS_URLS: expected name=url, got {item!r}")
        if not all(c.isalnum() or c in "-_." for c in name):
            raise ImproperlyConfigured(
                f"BUS_REDIS_URLS: connection name {name!r} may hold only letters, digits, '-', '_', '.'"
            )
        if not url.startswith(("redis://", "rediss://", "unix://")):
            raise ImproperlyConfigured(f"BUS_REDIS_URLS: {name} has an unsupported URL scheme")
        for key, value in parse_qsl(urlsplit(url).query, keep_blank_values=True):
            if key == "cluster" and value.lower() not in ("yes", "no", "true", "false", "1", "0", "auto"):
                raise ImproperlyConfigured(f"BUS_REDIS_URLS: {name} has cluster={value!r}; expected yes, no or auto")
        if name in connections:
            raise ImproperlyConfigured(f"BUS_REDIS_URLS: connection {name!r} is named twice")
        connections[name] = url
    if not connections:
        raise ImproperlyConfigured("BUS_REDIS_URLS names no connection")
    return connections
