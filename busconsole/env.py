"""Typed readers for settings taken from environment variables.

Each fails loudly on a value it cannot parse: a typo in production config must stop the
process at start-up, not quietly fall back to a default.
"""

from __future__ import annotations

import json
import os
import re
from ipaddress import IPv4Network, IPv6Network, ip_network

from django.core.exceptions import ImproperlyConfigured

from eventbus.connection import DEFAULT_PORT, ClusterValueError, split_mode
from eventbus.families import Family, FamilyError, check_delimiter, parse_families
from eventbus.sentinel import is_sentinel, sentinel_problem
from eventbus.tls import tls_problem

#: Where ``make run`` starts its private redis-server, and so the console's default Redis
#: (``busconsole/settings.py``) and that of ``scripts/run.py``: the port is ``$BUSCONSOLE_REDIS_PORT``,
#: :data:`PRIVATE_PORT` when unset or empty. The same number as the bus's command line's default
#: (:data:`eventbus.connection.DEFAULT_PORT`), so ``python -m eventbus`` beside ``make run`` sees its streams.
PRIVATE_PORT_VARIABLE = "BUSCONSOLE_REDIS_PORT"
PRIVATE_PORT = DEFAULT_PORT

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


_NAMED = re.compile(r"\s*[A-Za-z0-9._-]+=")


def _connection_items(raw: str) -> list[str]:
    """``BUS_REDIS_URLS`` cut at its commas, but for those between the hosts of a Sentinel URL.

    ``a=redis+sentinel://h1:26379,h2:26379/svc/0,b=redis://h3/0`` is two items: a piece that does
    not start with ``name=`` goes on with the Sentinel URL before it.
    """
    items: list[str] = []
    for piece in raw.split(","):
        if items and is_sentinel(items[-1].partition("=")[2].strip()) and not _NAMED.match(piece):
            items[-1] += "," + piece
        else:
            items.append(piece)
    return items


def parse_connections(raw: str) -> dict[str, str]:
    """Parse ``BUS_REDIS_URLS``: ``name=url`` pairs separated by commas (a Sentinel URL keeps its own)."""
    connections: dict[str, str] = {}
    for item in _connection_items(raw):
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
        if not is_sentinel(url) and not url.startswith(("redis://", "rediss://", "unix://")):
            raise ImproperlyConfigured(f"BUS_REDIS_URLS: {name} has an unsupported URL scheme")
        try:
            split_mode(url)
        except ClusterValueError as exc:
            raise ImproperlyConfigured(
                f"BUS_REDIS_URLS: {name} has cluster={exc.value!r}; expected yes, no or auto"
            ) from None
        problem = sentinel_problem(url) if is_sentinel(url) else tls_problem(url)
        if problem:
            raise ImproperlyConfigured(f"BUS_REDIS_URLS: {name} {problem}")
        if name in connections:
            raise ImproperlyConfigured(f"BUS_REDIS_URLS: connection {name!r} is named twice")
        connections[name] = url
    if not connections:
        raise ImproperlyConfigured("BUS_REDIS_URLS names no connection")
    return connections


def checked_redis_url(name: str, url: str) -> str:
    """``url`` (the value of variable ``name``) when its TLS parameters can work, else ImproperlyConfigured.

    TLS is set on the URL for every client (eventbus/tls.py); a misspelt parameter or a missing file
    would otherwise surface only at the first connection, naming neither.
    """
    problem = sentinel_problem(url) if is_sentinel(url) else tls_problem(url)
    if problem:
        raise ImproperlyConfigured(f"{name} {problem}")
    return url


#: What a masking rule may do to the value it selects (streams_app/masking).
MASK_ACTIONS = ("mask", "hash", "remove")
_MASK_RULE_KEYS = frozenset({"stream", "field", "action"})


def mask_path_split(path: str) -> tuple[str, ...]:
    """A masking rule's field path as its segments: ``data.customer.email`` -> ``("data", "customer", "email")``.

    The first segment is a top-level field name; the rest walk into that field's decoded JSON (object keys,
    list indexes as digits). ``*`` is a whole segment that matches every field, key or list item. A field
    name or key holding a dot cannot be named: the rule would read as a deeper path. Raises ValueError with
    the reason (the settings parser and the admin form say it to the person who wrote the path).
    """
    if not isinstance(path, str) or not path.strip():
        raise ValueError("the field path is empty")
    segments = tuple(path.strip().split("."))
    if any(not segment for segment in segments):
        raise ValueError(f"{path!r} has an empty segment (two dots, or a dot at an end)")
    if any("*" in segment and segment != "*" for segment in segments):
        raise ValueError(f"{path!r}: '*' must be a whole segment (data.*.email), not part of one")
    return segments


def parse_mask_rules(raw: str, name: str = "BUSCONSOLE_MASK_RULES") -> tuple[dict[str, str], ...]:
    """Validate ``BUSCONSOLE_MASK_RULES``: a JSON list of ``{"stream": glob, "field": path, "action": ...}``.

    ``stream`` is a Redis glob (default ``*``), ``field`` a path for :func:`mask_path_split`, ``action`` one
    of :data:`MASK_ACTIONS` (default ``mask``). A rule that cannot be read stops start-up: a typo here would
    otherwise show the very values the rule was written to hide.
    """
    if not raw.strip():
        return ()
    try:
        items = json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} is not valid JSON: {exc}") from None
    if not isinstance(items, list):
        raise ImproperlyConfigured(f"{name} must be a JSON list of objects.")
    rules: list[dict[str, str]] = []
    for index, item in enumerate(items):
        where = f"{name}[{index}]"
        if not isinstance(item, dict):
            raise ImproperlyConfigured(f"{where} must be an object, not {type(item).__name__}.")
        unknown = sorted(set(item) - _MASK_RULE_KEYS)
        if unknown:
            raise ImproperlyConfigured(
                f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; allowed: action, field, stream."
            )
        stream, field, action = item.get("stream", "*"), item.get("field"), item.get("action", "mask")
        if not isinstance(stream, str) or not stream:
            raise ImproperlyConfigured(f"{where}.stream must be a non-empty string (a glob such as 'orders*').")
        try:
            mask_path_split(field)  # type: ignore[arg-type]  # called for its ValueError on a bad path; the value is not used
        except ValueError as exc:
            raise ImproperlyConfigured(f"{where}.field: {exc}.") from None
        if action not in MASK_ACTIONS:
            raise ImproperlyConfigured(f"{where}.action: {action!r} must be one of {', '.join(MASK_ACTIONS)}.")
        rules.append({"stream": stream, "field": field.strip(), "action": action})  # type: ignore[union-attr]  # mask_path_split above refused anything but a path string
    return tuple(rules)


def parse_unmasked_roles(raw: list[str], name: str = "BUSCONSOLE_UNMASKED_ROLES") -> tuple[str, ...]:
    """The roles that may ask to see masked values unmasked; any name but a console role stops start-up."""
    known = ("viewer", "operator", "admin")
    for role in raw:
        if role not in known:
            raise ImproperlyConfigured(f"{name}: {role!r} is not a role; expected some of {', '.join(known)}.")
    return tuple(raw)


def parse_stream_families(raw: str, name: str = "BUSCONSOLE_STREAM_FAMILIES") -> tuple[Family, ...]:
    """The configured stream families (:func:`eventbus.families.parse_families`: a JSON list of globs or
    ``{"name", "match"}`` objects); one that cannot be read stops start-up with the reason."""
    try:
        return parse_families(raw, name)
    except FamilyError as exc:
        raise ImproperlyConfigured(str(exc)) from None


def parse_family_delimiter(raw: str, name: str = "BUSCONSOLE_FAMILY_DELIMITER") -> bytes:
    """The byte detected families cut keys at (:func:`eventbus.families.check_delimiter`)."""
    try:
        return check_delimiter(raw, name)
    except FamilyError as exc:
        raise ImproperlyConfigured(str(exc)) from None
