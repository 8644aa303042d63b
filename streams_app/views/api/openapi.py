"""The OpenAPI 3.1 description of ``/api/v1/``, built from the routes and models the API runs on.

:func:`openapi_document` walks Django's URL resolver for every route under ``/api/v1/`` and reads the
:class:`~streams_app.views.api.endpoint.Endpoint` each view declares: its method, query and body
models (:mod:`.schemas`, the very models that validate requests) and its replies (:mod:`.replies`).
Error responses follow from the route's shape: every call may be a 401, a route on a connection may
be a 404 (unknown connection, stream or group), a 503 (Redis unreachable) and a 400 (Redis refused),
input may be a 400, a POST a 403 (role, read-only mode, CSRF), a body a 413, and an operation that
starts a job (its reply 202) a 409 (the user already holds ``BUSCONSOLE_JOBS_PER_USER`` jobs).

The document is served at ``/api/v1/openapi.json`` and read by the reference page ``/api/v1/docs/``
(Swagger UI, vendored under ``static/vendor/``, started by ``static/js/api-docs.js``: no inline
script, no eval; the page alone widens the policy's ``img-src`` to ``data:``, for Swagger UI's icons).
Both need a login or a token, like every other API route: the document names no secret, but
"everything needs a login" (docs/api.md#authentication) is a rule that stays simple to check, and a script that
reads the document has a token anyway. ``openapi_document()`` is also callable without HTTP.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any, cast

from csp.constants import SELF
from csp.decorators import csp_update
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.converters import IntConverter
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from streams_app.views.api import replies
from streams_app.views.api.endpoint import MAX_BODY_BYTES, Endpoint, api_endpoint, endpoint_of, views_of
from streams_app.views.api.schemas import MAX_SELECTION
from streams_app.views.links import BytesSegmentConverter, ConnConverter

API_PREFIX = "api/v1/"
SWAGGER_UI = "vendor/swagger-ui-dist-5.35.0"
_REF = "#/components/schemas/{model}"
_ROUTE_PARAM = re.compile(r"<(?:[^>:]+:)?([^>]+)>")

_PATH_PARAMS: dict[type, tuple[dict[str, Any], str]] = {
    ConnConverter: (
        {"type": "string", "pattern": "^[A-Za-z0-9_.-]+$", "examples": ["default"]},
        "A connection name from BUS_REDIS_URLS (`default` when there is one).",
    ),
    BytesSegmentConverter: (
        # The example is the name itself: clients percent-encode path parameters (Swagger UI does), so
        # an escaped example would be escaped twice and name another key.
        {"type": "string", "minLength": 1, "examples": ["orders:created"]},
        "A stream key, group or consumer name, percent-encoded as one path segment like any path "
        "parameter, `/` included (`urllib.parse.quote(name_bytes, safe=\"\")`); a name that is not "
        "UTF-8 is sent as its raw bytes, percent-encoded, so any binary name round-trips.",
    ),
    IntConverter: ({"type": "integer", "minimum": 0, "format": "int64"}, "A job's id."),
}

_ERRORS: dict[int, tuple[str, str, str]] = {
    400: ("BadRequest", "bad_request",
          "The input is malformed (`bad_request`, naming each wrong field) or Redis refused the command "
          "(`redis_error`)."),
    401: ("Unauthorized", "unauthorized",
          "No login and no valid API token (`unauthorized`), or an expired token (`token_expired`)."),
    403: ("Forbidden", "forbidden",
          "The caller's role does not allow the action, or the console is read-only (`forbidden`); a "
          "session's POST without its CSRF token (`csrf_failed`)."),
    404: ("NotFound", "not_found", "No such connection, stream, group, consumer, DLQ or job (`not_found`)."),
    409: ("Conflict", "conflict", "The action would drop data the caller did not agree to drop (`conflict`)."),
    413: ("TooLarge", "too_large",
          f"The body is over {MAX_BODY_BYTES // 1024} KiB (`too_large`); it was not read."),
    503: ("Unreachable", "unreachable", "The Redis server of the connection cannot be reached (`unreachable`)."),
}

_TAGS = [
    ("streams", "Connections, streams, entries, replay."),
    ("groups", "Consumer groups: pending entries, claim, ack, rewind."),
    ("dlq", "Dead-letter queues: list, read, requeue, delete, purge."),
    ("retries", "The event bus's scheduled retries: list, retry now, move to the DLQ, delete."),
    ("admin", "Destructive actions, for admins: delete consumers, groups, entries; trim."),
    ("jobs", "Background jobs (bulk requeue, replay)."),
    ("audit", "The audit trail: one row per action attempt."),
    ("views", "Saved views: named links to console pages with their filters, private or shared."),
    ("annotations", "Annotations: deploy markers and notes shown on the charts and the incident timeline."),
    ("meta", "This description and its reference page."),
]

_DESCRIPTION = f"""\
The JSON API of busconsole, a console for Redis Streams.

**Authentication.** Every call needs a logged-in session or a personal API token sent as
`Authorization: Bearer <token>` (create one on `/tokens/`). POSTs from a session also need the
`X-CSRFToken` header; token calls do not.

**Roles.** Reads need any account (viewer); claim, ack, rewind, requeue and replay need the operator
role; deletions, purges and trims need the admin role. Each operation's `x-role` says which. In
read-only mode every action is refused with 403.

**Input.** Bodies are JSON objects with typed fields: flags are `true`/`false`, counts are integers
in range, entry IDs are `<ms>-<seq>`; a wrong type, a value out of range or an unknown field is a
400 whose message names the field, and so is a key given twice in one object. At most
{MAX_SELECTION} entry IDs per call; bodies over {MAX_BODY_BYTES // 1024} KiB are refused with 413.

**Addresses.** Reads end in a slash; actions are written without one, and answer with one too.

**Errors** are always `{{"error": {{"code": str, "message": str}}}}` with a 4xx status for the caller's
mistakes and 503 when a Redis server cannot be reached.
"""


# --------------------------------------------------------------------------------------- routes


def api_routes() -> Iterator[tuple[str, URLPattern]]:
    """Every ``(route, pattern)`` under ``/api/v1/``, as the URL resolver has them, bar slash twins.

    A twin is an address spelled without a trailing slash answered with one too by the same view
    (``streams_app.api_urls.action``): the description says so once rather than listing it twice.
    """

    def walk(patterns: list[Any], prefix: str) -> Iterator[tuple[str, URLPattern]]:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, route)
            elif route.startswith(API_PREFIX):
                yield route, pattern

    routes = list(walk(get_resolver().url_patterns, ""))
    callbacks = {route: pattern.callback for route, pattern in routes}
    for route, pattern in routes:
        if not (route.endswith("/") and callbacks.get(route[:-1]) is pattern.callback):
            yield route, pattern


def openapi_path(route: str) -> str:
    """``c/<conn:conn>/streams/`` as OpenAPI writes it: ``/c/{conn}/streams/``."""
    return "/" + _ROUTE_PARAM.sub(r"{\1}", route)


def error_statuses(endpoint: Endpoint, path_params: set[str]) -> list[int]:
    """The error statuses an operation can answer with, from its shape (see the module's docstring)."""
    statuses = {401, *endpoint.errors}
    if "conn" in path_params:
        statuses |= {400, 404, 503}
    if endpoint.query is not None or endpoint.body is not None:
        statuses.add(400)
    if endpoint.method == "POST":
        statuses.add(403)
    if endpoint.body is not None:
        statuses.add(413)
    if 202 in endpoint.replies:  # a job: refused while the user holds their limit of jobs
        statuses.add(409)
    return sorted(statuses)


# ------------------------------------------------------------------------------------- document


def _models(endpoints: list[Endpoint]) -> list[type[BaseModel]]:
    found: dict[str, type[BaseModel]] = {"ErrorReply": replies.ErrorReply}
    for endpoint in endpoints:
        for model in (endpoint.query, endpoint.body, *endpoint.replies.values()):
            if model is not None:
                found[model.__name__] = model
    return list(found.values())


def _not_null(schema: dict[str, Any]) -> dict[str, Any]:
    """A query parameter's schema without the ``null`` branch of an optional field (absent is absent)."""
    schema = {k: v for k, v in schema.items() if not (k == "default" and v is None)}
    branches = [b for b in schema.get("anyOf", ()) if b.get("type") != "null"]
    if "anyOf" in schema and len(branches) == 1:
        rest = {k: v for k, v in schema.items() if k != "anyOf"}
        return {**branches[0], **rest}
    return schema


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": _REF.format(model=model.__name__)}


def _path_parameters(pattern: URLPattern) -> list[dict[str, Any]]:
    out = []
    for name, converter in pattern.pattern.converters.items():
        schema, description = _PATH_PARAMS.get(type(converter), ({"type": "string"}, ""))
        out.append({"name": name, "in": "path", "required": True, "description": description, "schema": schema})
    return out


def _query_parameters(model: type[BaseModel], schemas: dict[str, Any]) -> list[dict[str, Any]]:
    schema = schemas[model.__name__]
    required = set(schema.get("required", ()))
    return [
        {"name": name, "in": "query", "required": name in required, "schema": _not_null(prop),
         **({"description": prop["description"]} if "description" in prop else {})}
        for name, prop in schema["properties"].items()
    ]


def _examples(model: type[BaseModel]) -> dict[str, Any]:
    extra = model.model_config.get("json_schema_extra")
    values = cast("list[Any]", extra.get("examples", [])) if isinstance(extra, dict) else []
    return {f"example{i + 1}": {"value": value} for i, value in enumerate(values)}


def _first_line(text: str | None) -> str:
    return inspect.cleandoc(text or "").split("\n\n")[0].replace("\n", " ")


def _success(endpoint: Endpoint, status: int, model: type[BaseModel] | None) -> dict[str, Any]:
    if model is None:
        types = (endpoint.content_type,) if isinstance(endpoint.content_type, str) else endpoint.content_type
        described = "The page." if types == ("text/html",) else "The file, in the media type its format names."
        return {"description": described, "content": {t: {"schema": {"type": "string"}} for t in types}}
    media: dict[str, Any] = {"schema": _ref(model)}
    if examples := _examples(model):
        media["examples"] = examples
    return {"description": _first_line(model.__doc__) or "OK", "content": {endpoint.content_type: media}}


def _operation(view: Callable[..., Any], endpoint: Endpoint, pattern: URLPattern, operation_id: str,
               schemas: dict[str, Any]) -> dict[str, Any]:
    params = _path_parameters(pattern)
    if endpoint.query is not None:
        params += _query_parameters(endpoint.query, schemas)
    description = [inspect.cleandoc(view.__doc__ or "")]
    for model in (endpoint.query, endpoint.body):
        if model is not None and model.__doc__:
            description.append(inspect.cleandoc(model.__doc__))
    description.append(f"Needs the **{endpoint.role}** role{_stricter(endpoint)}.")
    responses: dict[str, Any] = {str(status): _success(endpoint, status, model)
                                 for status, model in endpoint.replies.items()}
    for status in error_statuses(endpoint, {p["name"] for p in params if p["in"] == "path"}):
        responses[str(status)] = (
            {"$ref": f"#/components/responses/{_ERRORS[status][0]}"} if status in _ERRORS else _REDIRECT
        )
    operation: dict[str, Any] = {
        "operationId": operation_id,
        "summary": endpoint.summary,
        "description": "\n\n".join(part for part in description if part),
        "tags": [endpoint.tag],
        "parameters": params,
        "responses": dict(sorted(responses.items())),
        "x-role": endpoint.role,
    }
    if endpoint.body is not None:
        body_schema = schemas[endpoint.body.__name__]
        media: dict[str, Any] = {"schema": _ref(endpoint.body)}
        if examples := _examples(endpoint.body):
            media["examples"] = examples
        # An empty body is read as {}: it is "required" when {} would not validate.
        needed = bool(body_schema.get("required")) or "oneOf" in body_schema
        operation["requestBody"] = {"required": needed,
                                    "content": {"application/json": media}}
    return operation


def _stricter(endpoint: Endpoint) -> str:
    """The operation's actions that need more than its least role, as the description says them."""
    roles = endpoint.action_roles()
    least = min(roles.values(), default=None)
    more = [f"`{action}` needs **{role.label}**" for action, role in roles.items() if role != least]
    return f" ({'; '.join(more)})" if more else ""


_REDIRECT = {
    "description": "Not logged in: a redirect to the login page.",
    "headers": {"Location": {"schema": {"type": "string"}, "description": "The login page, then back here."}},
}


def _error_responses() -> dict[str, Any]:
    return {
        name: {
            "description": description,
            "content": {"application/json": {"schema": _ref(replies.ErrorReply),
                                             "example": {"error": {"code": code, "message": description}}}},
        }
        for name, code, description in _ERRORS.values()
    }


@cache
def openapi_document() -> dict[str, Any]:
    """The whole document (built once per process: routes and models do not change while it runs)."""
    routes = [
        (route, pattern, view, endpoint_of(view))
        for route, pattern in api_routes()
        for view in views_of(pattern.callback)  # one route may serve GET and POST (api_methods)
    ]
    missing = [route for route, _, _, endpoint in routes if endpoint is None]
    if missing:
        raise LookupError(f"API routes without @api_endpoint (so undescribed): {missing}")
    endpoints = [endpoint for _, _, _, endpoint in routes if endpoint is not None]
    _, defs = models_json_schema([(m, "validation") for m in _models(endpoints)], ref_template=_REF)
    schemas = defs.get("$defs", {})
    paths: dict[str, dict[str, Any]] = {}
    seen: set[str] = set()
    for route, pattern, view, endpoint in routes:
        assert endpoint is not None
        # One view may serve two routes (a job with and without its trailing slash).
        operation_id = view.__name__
        while operation_id in seen:
            operation_id += "_"
        seen.add(operation_id)
        operation = _operation(view, endpoint, pattern, operation_id, schemas)
        paths.setdefault(openapi_path(route), {})[endpoint.method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "busconsole API", "version": "1", "description": _DESCRIPTION},
        "security": [{"bearerToken": []}, {"sessionCookie": []}],
        "tags": [{"name": name, "description": description} for name, description in _TAGS],
        "paths": paths,
        "components": {
            "schemas": dict(sorted(schemas.items())),
            "responses": _error_responses(),
            "securitySchemes": {
                "bearerToken": {
                    "type": "http", "scheme": "bearer",
                    "description": "A personal API token from /tokens/ (or `manage.py console_token <user>`).",
                },
                "sessionCookie": {
                    "type": "apiKey", "in": "cookie", "name": settings.SESSION_COOKIE_NAME,
                    "description": "A logged-in browser session; its POSTs also send the X-CSRFToken header.",
                },
            },
        },
    }


# ---------------------------------------------------------------------------------------- views


@api_endpoint(method="GET", summary="This OpenAPI 3.1 document", tag="meta", replies={200: replies.OpenApiReply})
def openapi_json(request: HttpRequest) -> JsonResponse:
    return JsonResponse(openapi_document())


@login_not_required  # answers an anonymous browser with the login page rather than a JSON 401
@csp_update({"img-src": [SELF, "data:"]})  # Swagger UI's stylesheet draws its icons as data: SVGs
@api_endpoint(method="GET", summary="The API reference page (Swagger UI)", tag="meta", replies={200: None},
              content_type="text/html", errors=(302,))
def docs(request: HttpRequest) -> HttpResponse:
    """A readable reference of this document, rendered in the browser by the vendored Swagger UI."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    return render(request, "streams_app/api_docs.html", {"swagger_ui": SWAGGER_UI})
