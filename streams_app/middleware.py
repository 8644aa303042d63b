"""Request plumbing shared by every page and API call.

- :func:`raw_path_middleware` routes on the path as the client sent it, so ``%2F`` and ``%25``
  inside a stream key survive (servers decode the path before Django sees it).
- :func:`bearer_token_middleware` authenticates ``/api/v1/`` and ``/metrics`` by personal token, and
  nothing else.
- :class:`ConsoleLoginRequiredMiddleware`: every page needs a login; the API answers 401 in JSON.
- :class:`OpsErrorMiddleware` turns the access layer's errors into a banner page or a JSON error, and
  keeps Django's debug pages (``DEBUG=1``) off the API.
"""

from __future__ import annotations

import logging
from urllib.parse import quote

from django.conf import settings
from django.contrib.auth.middleware import LoginRequiredMiddleware
from django.core.exceptions import BadRequest, PermissionDenied, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import get_resolver

from streams_app.accounts.tokens import TokenRefused, token_authenticate
from streams_app.redis_ops.errors import OpsError
from streams_app.views.errors import api_error, is_api

log = logging.getLogger(__name__)

# Characters kept as they are when the routing path is rebuilt; ``%`` keeps existing escapes.
_PATH_SAFE = "/%:@!$&'()*+,;=-._~"


def _raw_path(request: HttpRequest) -> str | None:
    scope = getattr(request, "scope", None)
    if scope is not None:  # ASGI
        raw = scope.get("raw_path")
        if not raw:
            return None
        raw = raw.split(b"?", 1)[0]
        root = (scope.get("root_path") or "").encode()
        if root and raw.startswith(root):
            raw = raw[len(root) :]
        return quote(raw, safe=_PATH_SAFE)
    uri = request.META.get("RAW_URI") or request.META.get("REQUEST_URI")  # gunicorn / uWSGI
    if uri:
        path = uri.split("?", 1)[0]
        script = request.META.get("SCRIPT_NAME", "")
        if script and path.startswith(script):
            path = path[len(script) :]
        return quote(path.encode("latin-1", "replace"), safe=_PATH_SAFE)
    return None


def raw_path_middleware(get_response):
    def middleware(request: HttpRequest) -> HttpResponse:
        raw = _raw_path(request)
        if raw is None:
            # No raw path (Django's test client): re-encode the decoded one. Exact for every key
            # except those holding "/" or "%", which only a real server can carry.
            raw = quote(request.path_info.encode("utf-8", "surrogateescape"), safe=_PATH_SAFE)
        request.path_info = raw
        return get_response(request)

    return middleware


#: What an API token opens: the JSON API and the Prometheus scrape, nothing else.
TOKEN_PATH_PREFIX = "/api/v1/"
TOKEN_PATHS = frozenset({"/metrics"})


def token_path(request: HttpRequest) -> bool:
    """True where a bearer token authenticates: ``/api/v1/...`` and ``/metrics``.

    Everywhere else (pages, forms, ``/tokens/``, the Django admin) only a session counts, with its CSRF
    token: a token is a script's credential, and one that could reach the token pages or the admin
    could mint a replacement for itself or new users, so revoking it would not shut its holder out.
    """
    return request.path_info.startswith(TOKEN_PATH_PREFIX) or request.path_info in TOKEN_PATHS


def _bearer_header(request: HttpRequest) -> str | None:
    """The ``Authorization`` value when its scheme is Bearer; None for none or another scheme.

    Another scheme (``Basic ...`` forwarded by an auth proxy in front of the console) is not ours to
    judge: it is ignored and the session decides, as it would without the proxy.
    """
    header = request.META.get("HTTP_AUTHORIZATION", "")
    scheme = header.split(None, 1)[0] if header.strip() else ""
    return header if scheme.lower() == "bearer" else None


def _token_refused(exc: TokenRefused) -> JsonResponse:
    response = api_error(exc.code, exc.message, 401)
    response["WWW-Authenticate"] = 'Bearer realm="busconsole", error="invalid_token"'
    return response


def bearer_token_middleware(get_response):
    def middleware(request: HttpRequest) -> HttpResponse:
        if not token_path(request):
            return get_response(request)
        header = _bearer_header(request)
        if header is not None:
            try:
                request.user = token_authenticate(header)
            except TokenRefused as exc:
                return _token_refused(exc)
            # A bearer token is not sent by browsers on their own: no CSRF risk to guard against.
            request._dont_enforce_csrf_checks = True  # type: ignore[attr-defined]  # the CSRF middleware reads Django's private exemption flag
        elif is_api(request) and not request.user.is_authenticated:
            # Nobody is logged in, so there is no session for a forged request to ride: CSRF has
            # nothing to protect, and skipping it lets the login check answer the 401 the caller
            # needs ("authenticate") instead of a 403 about a missing CSRF token.
            request._dont_enforce_csrf_checks = True  # type: ignore[attr-defined]  # the CSRF middleware reads Django's private exemption flag
        return get_response(request)

    return middleware


class ConsoleLoginRequiredMiddleware(LoginRequiredMiddleware):
    """Django's login-required middleware, answering the API with a JSON 401."""

    def handle_no_permission(self, request, view_func):
        if is_api(request):
            return api_error("unauthorized", "Log in or send an API token (Authorization: Bearer ...).", 401)
        return super().handle_no_permission(request, view_func)


#: Exceptions Django itself turns into a 4xx through the project's error handlers, and their statuses.
_DJANGO_ANSWERS = (Http404, PermissionDenied, BadRequest, SuspiciousOperation)
_STATUS_OF = ((Http404, 404), (PermissionDenied, 403), (BadRequest, 400), (SuspiciousOperation, 400))


class OpsErrorMiddleware:
    """Errors from Redis become a clear page or JSON, never a 500."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if isinstance(exc, OpsError):
            if exc.status >= 500:
                log.warning("%s %s: %s", request.method, request.path, exc.message)
            if is_api(request):
                return api_error(exc.code, exc.message, exc.status)
            return render(
                request,
                "streams_app/error.html",
                {"error": exc, "conn": exc.conn or getattr(request, "console_conn", None)},
                status=exc.status,
            )
        if is_api(request):
            if isinstance(exc, _DJANGO_ANSWERS):
                if not settings.DEBUG:
                    return None  # Django's handler400/403/404 (views/errors.py) answer these in JSON
                # With DEBUG on (``make run``'s default) Django answers a 404 or 400 with its debug HTML
                # page instead of the handler: the API's callers get the same JSON error either way.
                status = next(code for kind, code in _STATUS_OF if isinstance(exc, kind))
                handler = get_resolver(getattr(request, "urlconf", None)).resolve_error_handler(status)
                return handler(request, exception=exc)  # type: ignore[call-arg]  # Django's 400/403/404 handlers take the exception
            log.exception("unhandled error in %s %s", request.method, request.path)
            return api_error("internal", "The console failed to answer; the error is logged.", 500)
        return None
