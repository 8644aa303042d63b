"""Request plumbing shared by every page and API call.

- :func:`raw_path_middleware` routes on the path as the client sent it, so ``%2F`` and ``%25``
  inside a stream key survive (servers decode the path before Django sees it).
- :func:`bearer_token_middleware` authenticates API calls by personal token.
- :class:`ConsoleLoginRequiredMiddleware`: every page needs a login; the API answers 401 in JSON.
- :class:`OpsErrorMiddleware` turns the access layer's errors into a banner page or a JSON error.
"""

from __future__ import annotations

import logging
from urllib.parse import quote

from django.contrib.auth.middleware import LoginRequiredMiddleware
from django.core.exceptions import BadRequest, PermissionDenied, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from streams_app.accounts.tokens import user_for_bearer
from streams_app.redis_ops.errors import OpsError

log = logging.getLogger(__name__)

# Characters kept as they are when the routing path is rebuilt; ``%`` keeps existing escapes.
_PATH_SAFE = "/%:@!$&'()*+,;=-._~"


def is_api(request: HttpRequest) -> bool:
    return request.path_info.startswith("/api/")


def api_error(code: str, message: str, status: int) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message}}, status=status)


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


def bearer_token_middleware(get_response):
    def middleware(request: HttpRequest) -> HttpResponse:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if header:
            user = user_for_bearer(header)
            if user is None:
                return api_error("unauthorized", "Invalid or revoked API token.", 401)
            request.user = user
            # A bearer token is not sent by browsers on their own: no CSRF risk to guard against.
            request._dont_enforce_csrf_checks = True
        return get_response(request)

    return middleware


class ConsoleLoginRequiredMiddleware(LoginRequiredMiddleware):
    """Django's login-required middleware, answering the API with a JSON 401."""

    def handle_no_permission(self, request, view_func):
        if is_api(request):
            return api_error("unauthorized", "Log in or send an API token (Authorization: Bearer ...).", 401)
        return super().handle_no_permission(request, view_func)


#: Exceptions Django itself turns into a 4xx through the project's error handlers.
_DJANGO_ANSWERS = (Http404, PermissionDenied, BadRequest, SuspiciousOperation)


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
                return None  # Django's handler400/403/404 (views/errors.py) answer these in JSON
            log.exception("unhandled error in %s %s", request.method, request.path)
            return api_error("internal", "The console failed to answer; the error is logged.", 500)
        return None
