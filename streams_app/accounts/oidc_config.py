"""Single sign-on settings, read from the environment, and the mapping of a provider's groups to roles.

Imported by ``busconsole/settings.py``, so it holds no Django state: what is wrong stops start-up with
an ImproperlyConfigured naming the variable, as :mod:`busconsole.env` does, because a typo in a role
mapping would otherwise hand out (or take away) admin quietly.

``BUSCONSOLE_OIDC_ROLES`` reads ``admin=ops-admins,operator=ops;oncall,viewer=*``: rules separated by
commas, each a console role, ``=``, and the provider's groups that give it separated by ``;``. ``*`` is
everyone the provider signs in. Groups are compared exactly (case counts, as it does at the providers),
and the highest role any rule gives wins. Unset, it is ``viewer=*``: every account on the console may
read (docs/api.md#roles-and-the-audit-trail), and more is an explicit grant.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from ipaddress import ip_address
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

#: The console's roles, lowest first: the rank decides when several rules match.
ROLE_NAMES = ("viewer", "operator", "admin")
EVERYONE = "*"
DEFAULT_SCOPES = ("openid", "email", "profile", "groups")
DEFAULT_ROLES = "viewer=*"

RoleRules = tuple[tuple[str, frozenset[str]], ...]


@dataclass(frozen=True)
class OidcSettings:
    """One OpenID provider the console signs people in with (``settings.BUSCONSOLE_OIDC``)."""

    issuer: str
    client_id: str
    client_secret: str = ""  # empty: a public client, PKCE alone proves the callback's caller
    scopes: tuple[str, ...] = DEFAULT_SCOPES
    groups_claim: str = "groups"
    roles: RoleRules = ((ROLE_NAMES[0], frozenset({EVERYONE})),)
    name: str = ""  # what the login button says: "Sign in with <name>"

    @property
    def display_name(self) -> str:
        return self.name or urlsplit(self.issuer).hostname or self.issuer

    @property
    def origin(self) -> str:
        """scheme://host[:port] of the issuer: where the login and logout forms' redirects go (the CSP)."""
        parts = urlsplit(self.issuer)
        return f"{parts.scheme}://{parts.netloc}"


def parse_oidc_roles(raw: str, name: str = "BUSCONSOLE_OIDC_ROLES") -> RoleRules:
    """``role=group;group,role=...`` as ``((role, groups), ...)``; anything unreadable stops start-up."""
    rules: dict[str, frozenset[str]] = {}
    for item in raw.split(","):
        item = item.strip()
        if not item:
            continue
        role, sep, groups_raw = item.partition("=")
        role = role.strip().lower()
        if not sep:
            raise ImproperlyConfigured(f"{name}: expected role=group;group, got {item!r}")
        if role not in ROLE_NAMES:
            raise ImproperlyConfigured(f"{name}: {role!r} is not a role; use {', '.join(ROLE_NAMES)}")
        if role in rules:
            raise ImproperlyConfigured(f"{name}: the {role} role is given twice; list its groups once, with ';'")
        groups = frozenset(g.strip() for g in groups_raw.split(";") if g.strip())
        if not groups:
            raise ImproperlyConfigured(f"{name}: {role}= names no group (use * for everyone)")
        rules[role] = groups
    if not rules:
        raise ImproperlyConfigured(f"{name} maps no group to a role; for example viewer=*")
    return tuple(rules.items())


def role_for_groups(rules: RoleRules, groups: Iterable[str]) -> str | None:
    """The highest role a rule gives to someone in ``groups``; None when no rule does."""
    held = set(groups)
    granted = [role for role, wanted in rules if EVERYONE in wanted or wanted & held]
    return max(granted, key=ROLE_NAMES.index, default=None)


def groups_from_claims(claims: Mapping[str, Any], claim: str) -> list[str]:
    """The groups a user's claims carry under ``claim``.

    The claim is looked up by its whole name first (Auth0's namespaced claims are URLs full of dots),
    then as a dotted path into nested objects (Keycloak's ``realm_access.roles``). A single string is
    one group; anything but strings in a list is ignored, so a provider's odd shape gives no group
    rather than a made-up one.
    """
    value: Any = claims.get(claim)
    if value is None and "." in claim:
        value = claims
        for part in claim.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return [item for item in value if isinstance(item, str)]
    return []


def _issuer(raw: str) -> str:
    parts = urlsplit(raw)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ImproperlyConfigured(f"BUSCONSOLE_OIDC_ISSUER must be an https:// URL, not {raw!r}")
    if parts.query or parts.fragment:
        raise ImproperlyConfigured(f"BUSCONSOLE_OIDC_ISSUER may hold no query or fragment: {raw!r}")
    if parts.scheme == "http" and not _loopback(parts.hostname):
        # OpenID Connect Discovery: the issuer is https. Plain http only on this machine (tests, a laptop).
        raise ImproperlyConfigured(f"BUSCONSOLE_OIDC_ISSUER must use https (http only on loopback): {raw!r}")
    return raw


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ip_address(host).is_loopback
    except ValueError:
        return False


def oidc_settings_from_env(environ: Mapping[str, str] = os.environ) -> OidcSettings | None:
    """The provider configured by the ``BUSCONSOLE_OIDC_*`` variables; None when no issuer is set."""
    issuer = environ.get("BUSCONSOLE_OIDC_ISSUER", "").strip()
    if not issuer:
        stray = sorted(k for k in environ if k.startswith("BUSCONSOLE_OIDC_") and environ[k].strip())
        if stray:
            raise ImproperlyConfigured(f"{', '.join(stray)} set without BUSCONSOLE_OIDC_ISSUER")
        return None
    client_id = environ.get("BUSCONSOLE_OIDC_CLIENT_ID", "").strip()
    if not client_id:
        raise ImproperlyConfigured("BUSCONSOLE_OIDC_ISSUER is set: BUSCONSOLE_OIDC_CLIENT_ID must be set too")
    raw_scopes = environ.get("BUSCONSOLE_OIDC_SCOPES", "").replace(",", " ").split()
    scopes = tuple(dict.fromkeys(raw_scopes)) or DEFAULT_SCOPES
    if "openid" not in scopes:
        raise ImproperlyConfigured(f"BUSCONSOLE_OIDC_SCOPES must include openid: {' '.join(scopes)!r}")
    groups_claim = environ.get("BUSCONSOLE_OIDC_GROUPS_CLAIM", "").strip() or "groups"
    roles = parse_oidc_roles(environ.get("BUSCONSOLE_OIDC_ROLES", "").strip() or DEFAULT_ROLES)
    return OidcSettings(
        issuer=_issuer(issuer),
        client_id=client_id,
        client_secret=environ.get("BUSCONSOLE_OIDC_CLIENT_SECRET", "").strip(),
        scopes=scopes,
        groups_claim=groups_claim,
        roles=roles,
        name=environ.get("BUSCONSOLE_OIDC_NAME", "").strip(),
    )
