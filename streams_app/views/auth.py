"""Log in and log out.

Django's own views do the work (safe ``next`` redirects, session rotation, POST-only logout); the
console only swaps in the throttled form and its template.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.views import LoginView

from streams_app.accounts.login import ThrottledAuthenticationForm

# Exempt from the console's login-required middleware: this is where anonymous users are sent.
login_view = login_not_required(
    LoginView.as_view(
        form_class=ThrottledAuthenticationForm,
        template_name="registration/login.html",
        redirect_authenticated_user=True,
    )
)
