"""Error handlers: JSON for the API, a console page otherwise; never Django's bare 500 page.

Django answers a wrong method (``@require_POST``, a class-based view's ``http_method_not_allowed``) with
an empty ``text/html`` 405 rather than through a handler; :func:`method_not_allowed_middleware` gives
that answer the same two shapes; :func:`unknown_address_middleware` keeps Django's debug 404 page (the
URL patterns) away from ``make run``.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.shortcuts import render

_MESSAGES = {
    400: ("bad_request", "The request was malformed."),
    403: ("forbidden", "Your role does not allow this."),
    404: ("not_found", "There is nothing at this address."),
    405: ("method_not_allowed", "This address does not answer that method."),
    500: ("internal", "The console failed to answer; the error is logged."),
}


def is_api(request: HttpRequest) -> bool:
    return request.path_info.startswith("/api/")


def api_error(code: str, message: str, status: int) -> JsonResponse:
    """The API's one error shape, ``{"error": {"code", "message"}}`` (the middleware answers with it too)."""
    return JsonResponse({"error": {"code": code, "message": message}}, status=status)


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


def not_found(request: HttpRequest, message: str) -> HttpResponse:
    """A 404 that says why (the handler's own 404 has one message for every missing thing)."""
    if is_api(request):
        return api_error("not_found", message, 404)
    return render(request, "streams_app/error.html", {"status": 404, "message": message}, status=404)


def server_error(request):
    return _answer(request, 500)


def csrf_failure(request, reason=""):
    """A refused CSRF check: JSON for the API, the console's 403 page otherwise."""
    message = "The request was refused: its CSRF token is missing or wrong. Reload the page and try again."
    if is_api(request):
        return api_error("csrf_failed", message + " (API scripts: send a bearer token instead.)", 403)
    return render(request, "streams_app/error.html", {"status": 403, "message": message}, status=403)


def method_not_allowed(request: HttpRequest, allowed: str) -> HttpResponse:
    """A 405 that says which methods the address takes (and keeps them in ``Allow``)."""
    message = f"{request.method} is not allowed here; this address answers {allowed or 'no method'}."
    if is_api(request):
        response: HttpResponse = api_error("method_not_allowed", message, 405)
    else:
        response = render(request, "streams_app/error.html", {"status": 405, "message": message}, status=405)
    response["Allow"] = allowed
    return response


def method_not_allowed_middleware(get_response: Callable[[HttpRequest], HttpResponse]):
    """Turn Django's empty 405 into :func:`method_not_allowed`'s JSON error or page."""

    def middleware(request: HttpRequest) -> HttpResponse:
        response = get_response(request)
        if isinstance(response, HttpResponseNotAllowed) and not response.content:
            return method_not_allowed(request, response.get("Allow", ""))
        return response

    return middleware


def unknown_address_middleware(get_response: Callable[[HttpRequest], HttpResponse]):
    """With ``DEBUG`` on (``make run``), an address no URL pattern matches gets the console's 404, not
    Django's debug page listing every URL pattern; without ``DEBUG`` Django already uses ``handler404``.

    Only unresolved addresses (``request.resolver_match`` is None once the URLconf has been tried):
    a 404 a view answered keeps its own message.
    """

    def middleware(request: HttpRequest) -> HttpResponse:
        response = get_response(request)
        if response.status_code == 404 and settings.DEBUG and getattr(request, "resolver_match", None) is None:
            return page_not_found(request)
        return response

    return middleware
