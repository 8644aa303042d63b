"""LDAP login settings, read from the environment (``BUSCONSOLE_LDAP_*``); Django-free and without
python-ldap, so that ``busconsole/settings.py`` can parse them before anything is loaded. Like the single
sign-on settings (:mod:`.oidc_config`), what is wrong stops start-up naming the variable.

``BUSCONSOLE_LDAP_ROLES`` has the syntax of ``BUSCONSOLE_OIDC_ROLES``, with the directory's group names
(their ``cn``): ``admin=ops-admins,operator=ops;oncall,viewer=*``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from streams_app.accounts.oidc_config import DEFAULT_ROLES, RoleRules, parse_oidc_roles

GROUP_TYPES = ("groupOfNames", "groupOfUniqueNames", "posixGroup")


@dataclass(frozen=True)
class LdapSettings:
    """A directory people log in with their own password (``settings.BUSCONSOLE_LDAP``)."""

    uri: str
    user_base: str
    group_base: str
    bind_dn: str = ""  # empty: anonymous search
    bind_password: str = ""
    user_filter: str = "(uid=%(user)s)"
    group_type: str = "groupOfNames"
    roles: RoleRules = (("viewer", frozenset({"*"})),)
    start_tls: bool = False
    ca_file: str = ""
    timeout_s: int = 5


def ldap_settings_from_env(environ: Mapping[str, str] = os.environ) -> LdapSettings | None:
    """The directory configured by ``BUSCONSOLE_LDAP_*``; None when no URI is set."""

    def get(name: str) -> str:
        return environ.get(f"BUSCONSOLE_LDAP_{name}", "").strip()

    uri = get("URI")
    if not uri:
        stray = sorted(k for k in environ if k.startswith("BUSCONSOLE_LDAP_") and environ[k].strip())
        if stray:
            raise ImproperlyConfigured(f"{', '.join(stray)} set without BUSCONSOLE_LDAP_URI")
        return None
    for one in uri.split():
        if urlsplit(one).scheme not in ("ldap", "ldaps") or not urlsplit(one).hostname:
            raise ImproperlyConfigured(f"BUSCONSOLE_LDAP_URI must be ldap:// or ldaps:// URLs, not {one!r}")
    user_base, group_base = get("USER_BASE"), get("GROUP_BASE")
    if not user_base or not group_base:
        raise ImproperlyConfigured("BUSCONSOLE_LDAP_URI is set: BUSCONSOLE_LDAP_USER_BASE and _GROUP_BASE must be too")
    user_filter = get("USER_FILTER") or "(uid=%(user)s)"
    if "%(user)s" not in user_filter or not (user_filter.startswith("(") and user_filter.endswith(")")):
        raise ImproperlyConfigured(f"BUSCONSOLE_LDAP_USER_FILTER must be an LDAP filter with %(user)s: {user_filter!r}")
    group_type = get("GROUP_TYPE") or "groupOfNames"
    if group_type not in GROUP_TYPES:
        raise ImproperlyConfigured(f"BUSCONSOLE_LDAP_GROUP_TYPE must be one of {', '.join(GROUP_TYPES)}: {group_type!r}")
    start_tls = get("START_TLS") or "0"
    if start_tls not in ("0", "1"):
        raise ImproperlyConfigured(f"BUSCONSOLE_LDAP_START_TLS must be 0 or 1, not {start_tls!r}")
    ca_file = get("CA_FILE")
    if ca_file and not os.path.isfile(ca_file):
        raise ImproperlyConfigured(f"BUSCONSOLE_LDAP_CA_FILE: no file at {ca_file!r}")
    return LdapSettings(
        uri=uri, user_base=user_base, group_base=group_base, bind_dn=get("BIND_DN"),
        bind_password=environ.get("BUSCONSOLE_LDAP_BIND_PASSWORD", ""), user_filter=user_filter,
        group_type=group_type, roles=parse_oidc_roles(get("ROLES") or DEFAULT_ROLES, "BUSCONSOLE_LDAP_ROLES"),
        start_tls=start_tls == "1", ca_file=ca_file,
    )
