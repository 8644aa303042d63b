"""Log in and log out: one login page, one throttle, whichever URL a person or a script uses.

Django's own views do the work (safe ``next`` redirects, session rotation, POST-only logout); the
console only swaps in the throttled form and its template. ``/admin/login/`` is the same page
(:func:`admin_login`): the Django admin's own login form has no throttle, so leaving it reachable would
let a guesser locked out of ``/login/`` carry on there.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import admin
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.views import LoginView
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase

from streams_app.accounts.login import ThrottledAuthenticationForm
from streams_app.accounts.roles import role_of
from streams_app.audit.records import audit_write_system


def login_context() -> dict[str, Any]:
    """What the login page offers: single sign-on's button (``sso_name``), and the password form unless
    BUSCONSOLE_LOCAL_LOGIN=0, when it is folded away for the break-glass accounts, or gone without any."""
    oidc = settings.BUSCONSOLE_OIDC
    return {
        "sso_name": oidc.display_name if oidc else "",
        # a directory's accounts log in with their passwords whatever BUSCONSOLE_LOCAL_LOGIN says
        "password_login": settings.BUSCONSOLE_LOCAL_LOGIN or settings.BUSCONSOLE_LDAP is not None,
        "break_glass": bool(settings.BUSCONSOLE_BREAK_GLASS_USERS),
    }


class ConsoleLoginView(LoginView):
    form_class = ThrottledAuthenticationForm
    template_name = "registration/login.html"
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().get_context_data(**kwargs), **login_context()}

    def form_valid(self, form: ThrottledAuthenticationForm) -> HttpResponse:  # type: ignore[override]  # form_class is ThrottledAuthenticationForm
        response = super().form_valid(form)
        if decided := form.directory_login:  # a directory set the role: say which, as single sign-on does
            audit_write_system(
                user=decided.user, conn="", action="login.ldap", params=decided.audit_params(), outcome="ok"
            )
        return response

    def form_invalid(self, form: ThrottledAuthenticationForm) -> HttpResponse:  # type: ignore[override]  # form_class is ThrottledAuthenticationForm
        if decided := form.directory_login:  # the password was right, the groups gave no role
            audit_write_system(
                user=decided.user, conn="", action="login.ldap", params=decided.audit_params(),
                outcome="denied", error="no group maps to a role",
            )
        return super().form_invalid(form)


# Exempt from the console's login-required middleware: this is where anonymous users are sent.
login_view = login_not_required(ConsoleLoginView.as_view())


@login_not_required
def admin_login(request: HttpRequest) -> HttpResponseBase:
    """``/admin/login/``: the console's login, where the Django admin sends whoever it does not let in.

    A logged-in user the admin refuses (a viewer or operator) gets a 403 saying why: sending them on to
    the login page would bounce them straight back to the admin (``redirect_authenticated_user``), and
    round again.
    """
    if request.user.is_authenticated and not admin.site.has_permission(request):
        raise PermissionDenied(
            f"The Django admin is for console admins; your account has the {role_of(request.user)} role."
        )
    return login_view(request)
