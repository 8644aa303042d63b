"""Add an entry to a stream from the console (as RedisInsight and kafka-ui produce messages).

GET shows two forms, prefilled from the stream's newest entry as a template: name/value rows, or one
JSON object. When that entry is an event of the bus (``type``, ``id`` and ``ts``), the fields the bus fills
itself are not copied: ``id`` gets a fresh event id and ``ts`` the time now (a copied event id would make
the new entry a second delivery of an existing event, which idempotent handlers drop), and the bus's own
bookkeeping of retries, requeues and replays is left out (:data:`BUS_BOOKKEEPING`). POST adds the entry (operator; with MAXLEN, which trims the stream, admin), writes one
audit row with the new ID and goes to the new entry's page. Input that cannot be an entry (a value
without a name, JSON that is not an object, an entry over the size bound) answers 400 with the form
as it was sent and the reason; a refusal (role, read-only mode) is a 403.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.views.decorators.http import require_http_methods

from eventbus import keys as bus_keys
from eventbus.codec import new_event_id, now_ms
from eventbus.text import display_text
from streams_app import services
from streams_app.redis_ops import client
from streams_app.redis_ops.errors import InvalidArgument
from streams_app.redis_ops.reads import entries as entry_reads
from streams_app.redis_ops.types import Entry, EntryMask
from streams_app.views import links
from streams_app.views.common import connection_context, render_screen
from streams_app.views.masking import request_masker

#: Empty name/value rows the form offers below the template's fields (the page works without JS).
BLANK_ROWS = 3
#: A template value longer than this is not copied into the form (the form would be unwieldy).
PREFILL_MAX = 64 * 1024
#: Fields the bus fills on publish: a fresh value replaces the template's.
BUS_FILLED = (bus_keys.F_ID.encode(), bus_keys.F_TS.encode())
#: Fields the bus (and the console's requeue and replay) add to say where an entry came from: a new event
#: has none, and one carrying ``_group`` would be run by that group alone, as a retry.
BUS_BOOKKEEPING = tuple(
    name.encode()
    for name in (bus_keys.F_RETRIES, bus_keys.F_GROUP, bus_keys.F_UNIQUE, bus_keys.F_FIRST_ID,
                 bus_keys.F_FAILED_ID, bus_keys.F_FAILED_AT, "_requeued_from", "_replayed_from")
)  # fmt: skip


def fields_from_object(obj: object) -> list[tuple[bytes, bytes]]:
    """A JSON object as entry fields, in its order: a string value is stored as its UTF-8, any other
    JSON value (a number, an object...) as its compact JSON text. InvalidArgument for anything else."""
    if not isinstance(obj, Mapping):
        raise InvalidArgument(
            'The JSON must be an object of field names to values, like {"type": "order.created"}.'
        )
    pairs: list[tuple[bytes, bytes]] = []
    for name, value in obj.items():
        if not isinstance(name, str) or not name:
            raise InvalidArgument("Every field needs a name: the JSON object has an empty key.")
        text = (
            value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        )
        pairs.append((name.encode(), text.encode()))
    return pairs


def _form_text(value: str) -> str:
    """A textarea's value as typed: browsers send each line break as CRLF, whatever the person typed."""
    return value.replace("\r\n", "\n")


def fields_from_post(post: QueryDict) -> list[tuple[bytes, bytes]]:
    """The fields a POST of either form holds (``mode`` says which); InvalidArgument when they cannot
    be an entry. Blank rows are skipped; a value without a name is refused, not dropped."""
    if post.get("mode") == "json":
        try:
            obj = json.loads(_form_text(post.get("json", "")))
        except (ValueError, RecursionError) as exc:
            raise InvalidArgument(f"The JSON is not valid: {exc}.") from None
        return fields_from_object(obj)
    names, values = post.getlist("name"), post.getlist("value")
    if len(names) != len(values):
        raise InvalidArgument("Each field row needs a name and a value.")
    pairs: list[tuple[bytes, bytes]] = []
    for row, (name, value) in enumerate(zip(names, values, strict=True), start=1):
        value = _form_text(value)
        if not name and not value:
            continue
        if not name:
            raise InvalidArgument(f"Row {row} has a value but no field name: every field needs a name.")
        pairs.append((name.encode(), value.encode()))
    return pairs


def maxlen_from_post(post: QueryDict) -> int | None:
    raw = post.get("maxlen", "").strip()
    if not raw:
        return None
    if not raw.isascii() or not raw.isdecimal() or len(raw) > 18:
        raise InvalidArgument("MAXLEN must be a whole number of entries, 0 or more.")
    return int(raw)


def template_fields(entry: Entry | None) -> tuple[list[tuple[bytes, bytes]], list[str] | None]:
    """The newest entry's fields as a template, and, when it is an event of the bus, the bookkeeping
    fields left out (None: not the bus's, copied as it is). See the module docstring."""
    fields = list(entry.fields) if entry else []
    names = {name for name, _ in fields}
    if not {bus_keys.F_TYPE.encode(), *BUS_FILLED} <= names:
        return fields, None
    fresh = {BUS_FILLED[0]: new_event_id().encode(), BUS_FILLED[1]: str(now_ms()).encode()}
    dropped = [display_text(name) for name, _ in fields if name in BUS_BOOKKEEPING]
    kept = [(name, fresh.get(name, value)) for name, value in fields if name not in BUS_BOOKKEEPING]
    return kept, list(dict.fromkeys(dropped))


def _template_rows(fields: list[tuple[bytes, bytes]]) -> list[dict[str, Any]]:
    """Template fields as form rows: names as text, values when they are UTF-8 text of a sensible size
    (a binary or huge value would not survive a round trip through a text box)."""
    rows = []
    for name, value in fields:
        try:
            text = value.decode("utf-8") if len(value) <= PREFILL_MAX else None
        except UnicodeDecodeError:
            text = None
        rows.append(
            {"name": display_text(name), "value": text or "", "skipped": text is None and bool(value)}
        )
    return rows


def _form_context(
    request: HttpRequest,
    conn: str,
    key: bytes,
    *,
    template: Entry | None,
    post: QueryDict | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    context = connection_context(request, conn)
    bus_dropped: list[str] | None = None
    if post is not None:  # shown again as it was sent, with what was wrong
        rows = [
            {"name": n, "value": _form_text(v), "skipped": False}
            for n, v in zip(post.getlist("name"), post.getlist("value"), strict=False)
        ]
        json_text = _form_text(post.get("json", ""))
        maxlen = post.get("maxlen", "")
        mode = "json" if post.get("mode") == "json" else "fields"
    else:
        fields, bus_dropped = template_fields(template)
        rows = _template_rows(fields)
        usable = {row["name"]: row["value"] for row in rows if not row["skipped"]}
        json_text = json.dumps(usable, ensure_ascii=False, indent=2) if usable else '{\n  "type": ""\n}'
        maxlen, mode = "", "fields"
    context.update(
        key=key,
        key_text=display_text(key),
        template_id=template.id if template else None,
        bus_template=bus_dropped is not None,
        bus_dropped=bus_dropped or [],
        rows=rows + [{"name": "", "value": "", "skipped": False}] * BLANK_ROWS,
        json_text=json_text,
        maxlen=maxlen,
        mode=mode,
        error=error,
        stream_page=links.stream_url(conn, key),
        here=links.stream_url(conn, key) + "add/",
    )
    return context


def _newest(conn: str, key: bytes, mask: EntryMask) -> Entry | None:
    """The stream's newest entry (the form's template); NotFound when there is no such stream."""
    page = entry_reads.entries_page(conn, key, order="desc", count=1, mask=mask)
    return page.entries[0] if page.entries else None


@require_http_methods(["GET", "POST"])
def entry_add(request: HttpRequest, conn: str, key: bytes) -> HttpResponse:
    if request.method == "GET":
        # Prefilled from the newest entry as the user may see it: masked values stay masked here too.
        masker = request_masker(request, conn, key)
        template = _newest(conn, key, masker.entry)
        context = _form_context(request, conn, key, template=template)
        masker.reveal_record()
        return render_screen(request, "streams_app/entry_add.html", context)
    request.console_conn = conn  # type: ignore[attr-defined]  # the error middleware reads it back (getattr) to name the connection
    client.connection(conn)  # an unknown connection is a 404 before anything is read
    post = request.POST
    action = services.entry_add_action(trims=bool(post.get("maxlen", "").strip()))
    try:
        fields, maxlen = services.action_input(
            user=request.user,
            conn=conn,
            action=action,
            stream=key,
            validate=lambda: (fields_from_post(post), maxlen_from_post(post)),
        )
        new_id = services.entry_add(user=request.user, conn=conn, key=key, fields=fields, maxlen=maxlen)
    except InvalidArgument as exc:
        context = _form_context(request, conn, key, template=None, post=post, error=exc.message)
        return render_screen(request, "streams_app/entry_add.html", context, status=400)
    messages.success(request, f"Added entry {new_id} to {display_text(key)}.")
    return HttpResponseRedirect(links.entry_url(conn, key, new_id))
