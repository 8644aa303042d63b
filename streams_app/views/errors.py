"""Error handlers: JSON for the API, a console page otherwise; never Django's bare 500 page."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from streams_app.middleware import api_error, is_api

_MESSAGES = {
    400: ("bad_request", "The request was malformed."),
    403: ("forbidden", "Your role does not allow this."),
    404: ("not_found", "There is nothing at this address."),
    500: ("internal", "The console failed to answer; the error is logged."),
}


def _answer(request: HttpRequest, status: int, exception: Exception | None = None) -> HttpResponse:
    code, message = _MESSAGES[status]
    detail = str(exception) if exception is not None and status in (403,) and str(exception) else message
    if is_api(request):
        return api_error(code, detail, status)
    return render(request, "streams_app/error.html", {"status": status, "message": detail}, status=status)


def bad_request(request, exception=None):
    return _answer(request, 400, exception)


def permission_denied(request, exception=None):
    return _answer(request, 403, exception)


def page_not_found(request, exception=None):
    return _answer(request, 404, exception)


def server_error(request):
    return _answer(request, 500)


def csrf_failure(request, reason=""):
    """A refused CSRF check: JSON for the API, the console's 403 page otherwise."""
    message = "The request was refused: its CSRF token is missing or wrong. Reload the page and try again."
    if is_api(request):
        return api_error("csrf_failed", message + " (API scripts: send a bearer token instead.)", 403)
    return render(request, "streams_app/error.html", {"status": 403, "message": message}, status=403)
