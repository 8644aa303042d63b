"""Single sign-on pages: the login button's post, the provider's callback, and the logout that ends the
provider's session too. The protocol lives in :mod:`streams_app.accounts.oidc`, the account and its role
in :mod:`streams_app.accounts.oidc_users`; these views carry HTTP in and out.

A refused sign-in (a forged or expired ID token, a provider that cannot be reached, groups that give no
role) is the login page again with the reason and a 4xx or 503, never a 500, and no session.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth import login as auth_login
from django.contrib.auth import logout as auth_logout
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from streams_app.accounts.login import ThrottledAuthenticationForm
from streams_app.accounts.oidc import (
    OidcError,
    OidcLogin,
    oidc_authorize_redirect,
    oidc_login_complete,
    oidc_logout_url,
)
from streams_app.accounts.oidc_config import OidcSettings
from streams_app.accounts.oidc_users import oidc_user_sync
from streams_app.audit.records import audit_write_system
from streams_app.views.auth import login_context
from streams_app.views.errors import not_found

log = logging.getLogger(__name__)

#: Session keys: where to go after the callback, and the ID token logout hands back to the provider.
SESSION_NEXT = "oidc_next"
SESSION_ID_TOKEN = "oidc_id_token"
#: The backend that reads a signed-in user on every request (with its role): SSO logins use it too.
BACKEND = "streams_app.accounts.role_backend.ConsoleModelBackend"
_NOT_CONFIGURED = "Single sign-on is not configured on this console (BUSCONSOLE_OIDC_ISSUER)."


@login_not_required
@require_POST
def oidc_login(request: HttpRequest) -> HttpResponse:
    """``POST /oidc/login/``: off to the provider; ``next`` (a console address) is where the callback ends."""
    config: OidcSettings | None = settings.BUSCONSOLE_OIDC
    if config is None:
        return not_found(request, _NOT_CONFIGURED)
    next_url = request.POST.get("next", "")
    safe = url_has_allowed_host_and_scheme(next_url, allowed_hosts={request.get_host()}, require_https=request.is_secure())
    request.session[SESSION_NEXT] = next_url if safe else ""
    try:
        return oidc_authorize_redirect(request, config, redirect_uri=request.build_absolute_uri(reverse("oidc-callback")))
    except OidcError as exc:
        return _refused(request, exc)


@login_not_required
@require_GET
def oidc_callback(request: HttpRequest) -> HttpResponse:
    """``GET /oidc/callback/``: the provider's answer; a session with the role its groups give, or why not."""
    config: OidcSettings | None = settings.BUSCONSOLE_OIDC
    if config is None:
        return not_found(request, _NOT_CONFIGURED)
    try:
        login = oidc_login_complete(request, config)
    except OidcError as exc:
        return _refused(request, exc)
    sync = oidc_user_sync(login=login, config=config)
    params = {"role": sync.role, "previous_role": sync.previous_role, "created": sync.created, "groups": list(login.groups[:100])}
    if sync.role is None:
        audit_write_system(
            user=sync.user, conn="", action="login.oidc", params=params, outcome="denied",
            error="no group maps to a role", identity=(login.issuer, login.subject),
        )
        return _refused(request, OidcError(_no_role(config, login)))
    next_url = request.session.get(SESSION_NEXT, "")
    auth_login(request, sync.user, backend=BACKEND)  # a new session key; other users' data flushed
    request.session[SESSION_ID_TOKEN] = login.id_token
    audit_write_system(user=sync.user, conn="", action="login.oidc", params=params, outcome="ok")
    return redirect(next_url or settings.LOGIN_REDIRECT_URL)


@require_POST
def logout(request: HttpRequest) -> HttpResponse:
    """``POST /logout/``: the console's session ends, then the provider's where it offers RP-initiated
    logout (its ``end_session_endpoint``), which sends the browser back to the login page."""
    config: OidcSettings | None = settings.BUSCONSOLE_OIDC
    id_token = request.session.get(SESSION_ID_TOKEN, "")
    auth_logout(request)
    if config is not None and id_token:
        back = request.build_absolute_uri(reverse("login"))
        if url := oidc_logout_url(config, id_token=id_token, post_logout_redirect_uri=back):
            return HttpResponseRedirect(url)
    return redirect(settings.LOGOUT_REDIRECT_URL)


def _refused(request: HttpRequest, error: OidcError) -> HttpResponse:
    context = {**login_context(), "form": ThrottledAuthenticationForm(request), "sso_error": error.message}
    return render(request, "registration/login.html", context, status=error.status)


def _no_role(config: OidcSettings, login: OidcLogin) -> str:
    groups = ", ".join(login.groups[:20]) or "none"
    return (
        f"{config.display_name} signed you in, but none of your groups ({groups}) gives a role on this console; "
        "ask its administrators to add you to a group it maps (BUSCONSOLE_OIDC_ROLES)."
    )
