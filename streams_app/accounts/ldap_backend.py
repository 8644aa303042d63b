"""Logins with a password an LDAP directory checks: django-auth-ldap's backend, its settings built from
``settings.BUSCONSOLE_LDAP`` (:mod:`.ldap_config`) rather than ``AUTH_LDAP_*``, and the console's rules on
top of it.

django-auth-ldap (on python-ldap, the OpenLDAP client library) is the well-kept choice: it searches the
user, binds as them to check the password, reads their groups (groupOfNames, groupOfUniqueNames,
posixGroup) and keeps the Django account's name and e-mail in line at every login. What this module adds:

- the role, at every login, from the groups' names through ``BUSCONSOLE_LDAP_ROLES``, set as the single
  sign-on login sets it (:mod:`.role_groups`: a demoted user's open websockets close; no role deactivates
  the account and refuses the login with the reason);
- no takeover: a directory login never opens an account made otherwise (a local one, which has a usable
  password, or a single sign-on one), whatever its name;
- a directory that cannot be asked is said so on the login page (:class:`.login.LoginRefused`), not
  passed off as a wrong password, and within ``timeout_s``, not after the operating system's TCP timeout;
- every directory login, allowed or refused for want of a role, leaves a ``login.ldap`` audit row with the
  role it gave, the role before and the groups (written by the login view from :class:`.login.DirectoryLogin`);
- sessions are read back by the console's own backend, so the role is read with the user and an inactive
  account is logged out, as for every other session.
"""

from __future__ import annotations

import logging
from typing import Any

import ldap
from django.conf import settings
from django.db import transaction
from django_auth_ldap.backend import LDAPBackend, ldap_error
from django_auth_ldap.config import (
    GroupOfNamesType,
    GroupOfUniqueNamesType,
    LDAPSearch,
    LDAPSettings,
    PosixGroupType,
)

from streams_app.accounts.ldap_config import LdapSettings
from streams_app.accounts.login import DirectoryLogin, LoginRefused
from streams_app.accounts.models import OidcIdentity
from streams_app.accounts.oidc_config import role_for_groups
from streams_app.accounts.role_backend import ConsoleModelBackend
from streams_app.accounts.role_groups import account_flags, role_group_of, role_group_set

log = logging.getLogger(__name__)

_GROUP_TYPES = {"groupOfNames": GroupOfNamesType, "groupOfUniqueNames": GroupOfUniqueNamesType, "posixGroup": PosixGroupType}


def auth_ldap_settings(config: LdapSettings) -> dict[str, Any]:
    """django-auth-ldap's settings for ``config`` (the names it reads after ``AUTH_LDAP_``)."""
    options: dict[int, Any] = {
        ldap.OPT_NETWORK_TIMEOUT: config.timeout_s,
        ldap.OPT_TIMEOUT: config.timeout_s,
        ldap.OPT_REFERRALS: 0,
    }
    if config.ca_file:
        options[ldap.OPT_X_TLS_CACERTFILE] = config.ca_file
        options[ldap.OPT_X_TLS_REQUIRE_CERT] = ldap.OPT_X_TLS_DEMAND
        options[ldap.OPT_X_TLS_NEWCTX] = 0  # last: makes the TLS options above take effect
    return {
        "SERVER_URI": config.uri,
        "BIND_DN": config.bind_dn,
        "BIND_PASSWORD": config.bind_password,
        "START_TLS": config.start_tls,
        "CONNECTION_OPTIONS": options,
        "USER_SEARCH": LDAPSearch(config.user_base, ldap.SCOPE_SUBTREE, config.user_filter),
        "GROUP_SEARCH": LDAPSearch(config.group_base, ldap.SCOPE_SUBTREE, f"(objectClass={config.group_type})"),
        "GROUP_TYPE": _GROUP_TYPES[config.group_type](),
        "USER_ATTR_MAP": {"first_name": "givenName", "last_name": "sn", "email": "mail"},
        "ALWAYS_UPDATE_USER": True,
        "CACHE_TIMEOUT": 0,
    }


class ConsoleLDAPBackend(LDAPBackend):
    """django-auth-ldap with the console's settings and rules; authenticates nobody without BUSCONSOLE_LDAP."""

    settings_prefix = "BUSCONSOLE_LDAP_NOT_A_SETTING_"  # every value comes from the defaults below
    _settings: LDAPSettings | None  # LDAPBackend's cache of its settings (None on the class)

    @property
    def settings(self) -> LDAPSettings:
        config = settings.BUSCONSOLE_LDAP
        if self._settings is None or getattr(self, "_config", None) is not config:
            self._settings, self._config = LDAPSettings(self.settings_prefix, auth_ldap_settings(config)), config  # type: ignore[arg-type]  # this backend is installed only with BUSCONSOLE_LDAP set (busconsole/settings.py)
        return self._settings

    @settings.setter
    def settings(self, value: LDAPSettings) -> None:
        self._settings = value

    def authenticate(self, request: Any, username: str | None = None, password: str | None = None, **kwargs: Any):
        if settings.BUSCONSOLE_LDAP is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)

    def get_user(self, user_id: Any):
        return ConsoleModelBackend().get_user(user_id)

    def get_or_build_user(self, username: str, ldap_user: Any):
        user, built = super().get_or_build_user(username, ldap_user)
        if not built and (user.has_usable_password() or OidcIdentity.objects.filter(user_id=user.pk).exists()):
            # A local account (it has a password of its own) or a single sign-on one: never opened by the
            # directory, whose "admin" would otherwise become the console's break-glass admin.
            raise ldap_user.AuthenticationFailed(f"{username!r} is an account the directory does not own")
        return user, built

    def authenticate_ldap_user(self, ldap_user: Any, password: str):
        user = super().authenticate_ldap_user(ldap_user, password)
        if user is None:
            return None
        groups = sorted(ldap_user.group_names)
        role = role_for_groups(settings.BUSCONSOLE_LDAP.roles, groups)  # type: ignore[union-attr]  # this backend is installed only with BUSCONSOLE_LDAP set (busconsole/settings.py)
        with transaction.atomic():
            previous = role_group_of(user)
            if changed := account_flags(user, active=role is not None):
                user.save(update_fields=changed)
            role_group_set(user, role)
        decided = DirectoryLogin(user=user, role=role, previous_role=previous, groups=tuple(groups))
        if role is None:
            raise LoginRefused(
                f"The directory knows you, but none of your groups ({', '.join(groups[:20]) or 'none'}) gives a "
                "role on this console; ask its administrators to add you to a group it maps (BUSCONSOLE_LDAP_ROLES).",
                directory=decided,
            )
        user.directory_login = decided  # for the login view's audit row (ThrottledAuthenticationForm)
        return user


def _directory_unavailable(sender: Any, context: str, exception: Exception, **kwargs: Any) -> None:
    """django-auth-ldap only logs a directory error and answers "no such user"; say what happened."""
    if context not in ("authenticate", "search_for_user_dn"):  # the steps of a login
        return
    reason = exception.args[0].get("desc", "") if exception.args and isinstance(exception.args[0], dict) else ""
    log.warning("LDAP login at %s failed: %r", settings.BUSCONSOLE_LDAP.uri, exception)  # type: ignore[union-attr]  # this backend is installed only with BUSCONSOLE_LDAP set (busconsole/settings.py)
    raise LoginRefused(
        f"The directory could not check your password ({reason or type(exception).__name__}); try again shortly."
    )


ldap_error.connect(_directory_unavailable, sender=ConsoleLDAPBackend, dispatch_uid="console-ldap-unavailable")
