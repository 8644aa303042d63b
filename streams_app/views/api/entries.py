"""``POST /api/v1/c/<conn>/streams/<key>/entries/``: add one entry (the GET of the same address reads
the entries, :func:`streams_app.views.api.read.entries`; :func:`entries_route` serves both)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse
from pydantic import ConfigDict, Field, JsonValue

from streams_app import services
from streams_app.redis_ops import client
from streams_app.views import links
from streams_app.views.api import read
from streams_app.views.api.endpoint import api_endpoint, api_methods, read_json
from streams_app.views.api.replies import Reply
from streams_app.views.api.schemas import EXAMPLE_ID, Body, Millis, parse
from streams_app.views.entry_add import fields_from_object


class EntryAddBody(Body):
    """Add one entry to the existing stream. ``fields`` maps field names to values: a string is stored
    as its UTF-8, any other JSON value as its compact JSON text. ``maxlen`` trims the stream to about
    that many entries in the same XADD, and so needs the admin role, like a trim."""

    fields: dict[str, JsonValue] = Field(min_length=1)
    maxlen: Millis | None = None

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"fields": {"type": "order.created", "data": '{"order_id": 7}'}}]}
    )


class EntryAddReply(Reply):
    """The new entry's ID (Redis chose it) and its page."""

    id: str
    url: str

    model_config = ConfigDict(
        frozen=True,
        json_schema_extra={
            "examples": [{"id": EXAMPLE_ID, "url": "/c/default/streams/orders/entries/1700000000000-0/"}]
        },
    )


@api_endpoint(
    method="POST",
    summary="Add an entry (XADD)",
    tag="streams",
    body=EntryAddBody,
    action=("entry.add", "entry.add.trim"),
    replies={201: EntryAddReply},
)
def entry_add(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    """Writes one audit row with the new ID. The stream must exist (a typo must not create a stream)."""
    client.connection(conn)
    body: dict[str, Any] = read_json(request)
    action = services.entry_add_action(trims=body.get("maxlen") is not None)

    def validate() -> tuple[list[tuple[bytes, bytes]], int | None]:
        data = parse(EntryAddBody, body)
        return fields_from_object(data.fields), data.maxlen

    # One audit row whatever happens: a refusal or a bad body leaves it here, an add in the service.
    fields, maxlen = services.action_input(
        user=request.user, conn=conn, action=action, stream=key, validate=validate
    )
    new_id = services.entry_add(user=request.user, conn=conn, key=key, fields=fields, maxlen=maxlen)
    return JsonResponse({"id": new_id, "url": links.entry_url(conn, key, new_id)}, status=201)


#: The one route of ``.../entries/``: GET reads a page of entries, POST adds one.
entries_route = api_methods(read.entries, entry_add)
