"""What each JSON API view takes and answers, declared once, on the view, and the body reader.

``@api_endpoint(...)`` restricts the view to its HTTP method and records its query model, body
model, replies and the actions it runs on the view function; the least role comes from
``ACTION_ROLES``, the table the audit gate checks, so the document cannot say another. :mod:`streams_app.views.api.openapi` walks the
URL resolver and reads these records to write the OpenAPI document, so every route under
``/api/v1/`` is described by the same models that validate it, and a route without a record fails
the document's build (and its test) instead of going undescribed.

:func:`read_json` is the one way an API view reads its body: the size is checked before anything
is read (413), the parser has a depth limit (a 5000-deep array is a 400, not Python's
RecursionError), a key given twice in one object is a 400 naming it (parsers keep one of the two
silently: ``{"dry_run": true, "dry_run": false}`` ran a trim), and only a JSON object goes on.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, TypeVar, cast

from django.http import HttpRequest
from django.views.decorators.http import require_http_methods
from pydantic import BaseModel
from pydantic_core import from_json

from streams_app import services
from streams_app.accounts.roles import Role
from streams_app.redis_ops.errors import InvalidArgument, OpsError
from streams_app.views.api.schemas import Body, Query, parse

#: The largest request body the API reads. The biggest real one, 1000 entry IDs, is about 45 KB.
MAX_BODY_BYTES = 256 * 1024

V = TypeVar("V", bound=Callable[..., Any])
B = TypeVar("B", bound=Body)


class BodyTooLarge(OpsError):
    """The request body is over :data:`MAX_BODY_BYTES`: refused before it is read or parsed."""

    code = "too_large"
    status = 413


@dataclass(frozen=True)
class Endpoint:
    """One API operation as the OpenAPI document shows it.

    ``replies`` maps each success status to its reply model (None: no JSON schema, e.g. the docs
    page). ``errors`` adds error statuses the route's shape does not imply (409 for a consumer with
    pending entries); the usual ones (400, 401, 403, 404, 413, 503) follow from the method, the
    path and the models (:func:`streams_app.views.api.openapi.error_statuses`).

    ``action`` names the action the view runs through the audit gate, or several (a dry run's, a
    variant that needs more: ``entry.add.trim``); None for a read any signed-in user may make. The role
    the document gives is the least of their roles in ``ACTION_ROLES`` (:attr:`role`).
    """

    method: Literal["GET", "POST"]
    summary: str
    tag: str
    replies: Mapping[int, type[BaseModel] | None]
    query: type[Query] | None = None
    body: type[Body] | None = None
    action: str | tuple[str, ...] | None = None
    errors: tuple[int, ...] = ()
    #: the reply's media type, or several when a parameter chooses (an export's format)
    content_type: str | tuple[str, ...] = "application/json"

    @property
    def actions(self) -> tuple[str, ...]:
        return (self.action,) if isinstance(self.action, str) else tuple(self.action or ())

    def action_roles(self) -> dict[str, Role]:
        """Each action's role, read from the table when asked (it is the gate's, not a copy)."""
        return {action: services.ACTION_ROLES[action] for action in self.actions}

    @property
    def role(self) -> str:
        """The least role that may call the operation at all."""
        return min(self.action_roles().values(), default=Role.VIEWER).label


def api_endpoint(**spec: Any) -> Callable[[V], V]:
    """Declare a view's :class:`Endpoint` and allow only its method (anything else is a 405). An action
    the gate does not know is refused here, at import, rather than documented as nobody's."""
    endpoint = Endpoint(**spec)
    unknown = [action for action in endpoint.actions if action not in services.ACTION_ROLES]
    if unknown:
        raise LookupError(f"@api_endpoint names actions that are not in ACTION_ROLES: {unknown}")

    def decorate(view: V) -> V:
        guarded = require_http_methods([endpoint.method])(view)
        guarded.api_endpoint = endpoint  # type: ignore[attr-defined]  # the record rides on the view function for the OpenAPI builder
        return guarded

    return decorate


def endpoint_of(view: Callable[..., Any]) -> Endpoint | None:
    return getattr(view, "api_endpoint", None)


def api_methods(*views: Callable[..., Any]) -> Callable[..., Any]:
    """One route served by several ``@api_endpoint`` views, one per method (a collection that GET
    reads and POST adds to); any other method is a 405. The OpenAPI document describes each view
    (:func:`views_of`)."""
    by_method: dict[str, Callable[..., Any]] = {}
    for view in views:
        endpoint = endpoint_of(view)
        if endpoint is None or endpoint.method in by_method:
            raise TypeError(f"{view.__name__}: each view needs its own @api_endpoint method")
        by_method[endpoint.method] = view

    @require_http_methods(list(by_method))
    def route(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        return by_method[cast(str, request.method)](request, *args, **kwargs)  # require_http_methods let it in

    route.api_views = tuple(views)  # type: ignore[attr-defined]  # the views ride on the URL pattern for the OpenAPI builder
    route.__name__ = "_".join(view.__name__ for view in views)
    return route


def views_of(callback: Callable[..., Any]) -> tuple[Callable[..., Any], ...]:
    """The described views a route's callback stands for: itself, or those of :func:`api_methods`."""
    return getattr(callback, "api_views", (callback,))


def read_json(request: HttpRequest) -> dict[str, Any]:
    """The request's JSON object. 413 when the body is over :data:`MAX_BODY_BYTES` (by its declared
    length before reading, else by what arrives), 400 for anything but a JSON object; an empty body
    is ``{}``. Neither is audited: like a CSRF refusal, it happens before the action is known."""
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > MAX_BODY_BYTES:
        raise BodyTooLarge(_too_large())
    raw = request.read(MAX_BODY_BYTES + 1)
    if len(raw) > MAX_BODY_BYTES:
        raise BodyTooLarge(_too_large())
    if not raw.strip():
        return {}
    try:
        # pydantic-core's parser: no RecursionError (nesting deeper than 200 is an error), no
        # NaN or Infinity, integers of at most 4300 digits.
        data = from_json(raw, allow_inf_nan=False)
    except ValueError as exc:
        raise InvalidArgument(f"The request body is not valid JSON: {exc}.") from None
    if not isinstance(data, dict):
        raise InvalidArgument("The request body must be a JSON object.")
    # pydantic-core keeps the last of a repeated key and cannot say it saw one; the standard parser's
    # object_pairs_hook sees every pair. Run on a body pydantic-core accepted, so within its depth limit.
    try:
        json.loads(raw, object_pairs_hook=_refuse_repeated_keys)
    except ValueError as exc:  # what pydantic-core took and the standard parser does not: still not ours
        raise InvalidArgument(f"The request body is not valid JSON: {exc}.") from None
    return data


def _refuse_repeated_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise InvalidArgument(
                f"The request body has the key {json.dumps(key)} more than once; send each key once."
            )
        seen.add(key)
    return {}  # the values are pydantic-core's; this pass only looks at the keys


def _too_large() -> str:
    return f"The request body is over {MAX_BODY_BYTES // 1024} KiB; send at most 1000 entry IDs at once."


def flag(body: Mapping[str, Any], name: str) -> bool:
    """Whether ``body`` sets ``name`` to JSON ``true``: it decides which action the attempt is
    audited as before the body is validated (``"no"`` is not true; it is then refused as a 400)."""
    return body.get(name) is True


def body_input(
    request: HttpRequest,
    conn: str,
    action: str,
    model: type[B],
    body: Mapping[str, Any],
    *,
    key: bytes,
    group: bytes | None = None,
) -> B:
    """An API action's input: the role check of ``action`` (403 whatever was sent), then ``body``
    validated by ``model``; a refusal or a malformed body leaves its one audit row
    (:func:`streams_app.services.action_input`)."""
    return services.action_input(
        user=request.user, conn=conn, action=action, stream=key, group=group, validate=partial(parse, model, body)
    )
