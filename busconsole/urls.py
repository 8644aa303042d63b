"""Root URLs: login, admin, liveness and readiness, and the console (streams_app.urls)."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth.decorators import login_not_required
from django.urls import include, path

from streams_app.views import auth as auth_views
from streams_app.views import oidc as oidc_views
from streams_app.views.health import readyz
from streams_app.views.overview import healthz

urlpatterns = [
    path("login/", auth_views.login_view, name="login"),
    # Ends the provider's session too when single sign-on opened this one (views/oidc.py).
    path("logout/", oidc_views.logout, name="logout"),
    path("oidc/login/", oidc_views.oidc_login, name="oidc-login"),
    path("oidc/callback/", oidc_views.oidc_callback, name="oidc-callback"),
    path("healthz", login_not_required(healthz), name="healthz"),
    path("readyz", login_not_required(readyz), name="readyz"),  # views/health.py says what it checks
    # Before admin.site.urls: the admin's login is the console's throttled one (views/auth.py says why).
    path("admin/login/", auth_views.admin_login, name="admin-login"),
    path("admin/", admin.site.urls),
    path("", include("streams_app.urls")),
]

handler400 = "streams_app.views.errors.bad_request"
handler403 = "streams_app.views.errors.permission_denied"
handler404 = "streams_app.views.errors.page_not_found"
handler500 = "streams_app.views.errors.server_error"
