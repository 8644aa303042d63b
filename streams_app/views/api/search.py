"""``GET /api/v1/c/<conn>/streams/<key>/search``: one bounded step of a payload search.

The query language and its rule (expression or plain text) are described in
:func:`streams_app.search.compile_query`; this view validates the query string, runs one step of
:func:`streams_app.search.search_page` and answers with the matches as the entries API shows them and
what was covered, so a client can say "scanned N of M" and continue from ``next``.
"""

from __future__ import annotations

from typing import Any, Literal

from django.http import HttpRequest, JsonResponse
from pydantic import ConfigDict, Field

from eventbus.search.query import MAX_QUERY
from eventbus.search.query import Query as CompiledQuery
from streams_app import search
from streams_app.masking.apply import search_mask
from streams_app.redis_ops import client, conventions
from streams_app.views import presenters
from streams_app.views.api.endpoint import api_endpoint
from streams_app.views.api.replies import EntryIdText, EntryRow, Reply
from streams_app.views.api.schemas import EXAMPLE_ID, CursorId, Query, parse, position, query_int, text


class SearchQuery(Query):
    """``q`` is a CEL expression (``data.customer.id == 42``, ``type in ["order.created"]``,
    ``error.contains("timeout")``, ``size(data.items) > 3``, ``has(data.refund)``) or plain text, which
    matches entries with a field name or value containing it, ignoring case (a query is plain text
    when it is a bare word of letters, digits and ``_ . - : / @``, or does not parse and uses no CEL
    operator). An expression's variables: every field by name (a field always wins over a built-in
    name), ``entry.id`` and ``entry.time`` (the entry's ID and time; ``id`` and ``time`` name them
    too when the entry has no field so called: on a bus DLQ, whose entries carry the event's ``id``,
    ``id`` is that field), ``fields["any name"]`` and, on a DLQ, ``error``, ``traceback``,
    ``retries``, ``origin``, ``original_id``, ``failed_at``, ``group``. ``matches`` takes RE2
    syntax. An expression nested more than 32 levels deep, or whose cost bound (nested
    comprehensions multiply the sizes of their lists) is over 200,000 steps an entry, is refused
    with a 400 that says why. ``from`` and ``to`` bound the range (inclusive; IDs, milliseconds or
    ISO-8601 times), ``direction`` says which end the scan starts from, ``cursor`` continues after
    the ``next`` of a previous answer. One answer scans at most 100,000 entries or 2 seconds."""

    q: text(min_length=1, max_length=MAX_QUERY)  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    from_: position() | None = Field(None, alias="from")  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    to: position() | None = None  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    direction: Literal["asc", "desc"] = "asc"
    cursor: CursorId | None = None
    limit: query_int(ge=1, le=search.MAX_LIMIT) = search.DEFAULT_LIMIT  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type


class SearchReply(Reply):
    """``matches`` as the entries API shows them; ``scanned`` entries were tested, from ``from_id`` to
    ``to_id`` in scan order; ``total`` is the stream's length when this answer began (XLEN, read in one
    MULTI with the newest entry's ID: the scan stops at that entry, so ``scanned`` never exceeds
    ``total``, and entries added meanwhile are left to the next answer); ``complete`` is true when the
    range's end was reached; otherwise ``next`` is the ``cursor`` to continue with (no entry is tested
    twice or skipped). ``too_costly`` counts the entries left out because their own data (long lists
    under nested comprehensions, long strings under ``+``) made the expression too costly to evaluate:
    they are not matches; narrow the expression to search them."""

    matches: list[EntryRow]
    scanned: int
    total: int
    from_id: EntryIdText | None
    to_id: EntryIdText | None
    next: EntryIdText | None
    complete: bool
    elapsed_ms: int
    too_costly: int

    model_config = ConfigDict(
        frozen=True,
        json_schema_extra={
            "examples": [
                {
                    "matches": [
                        {
                            "id": EXAMPLE_ID,
                            "fields": {"type": "order.paid"},
                            "decoded": [
                                {
                                    "name": "type",
                                    "format": "text",
                                    "value": "order.paid",
                                    "size": 10,
                                    "truncated": False,
                                }
                            ],
                        }
                    ],
                    "scanned": 500,
                    "total": 500,
                    "from_id": EXAMPLE_ID,
                    "to_id": "1700000000999-0",
                    "next": None,
                    "complete": True,
                    "elapsed_ms": 12,
                    "too_costly": 0,
                }
            ]
        },
    )


def search_params(request: HttpRequest, *, forms: bool = False) -> SearchQuery:
    """The query string read by :class:`SearchQuery`, by the parameters' public names (``from``).

    With ``forms`` (the pages' search box), a parameter left empty is absent: a form sends every
    field. The API checks an empty value like any other, as everywhere in the API."""
    names = {field.alias or name for name, field in SearchQuery.model_fields.items()}
    given = {name: request.GET[name] for name in names if name in request.GET}
    if forms:
        given = {name: value for name, value in given.items() if value != "" or name == "q"}
    return parse(SearchQuery, given)


def search_by_params(
    request: HttpRequest, conn: str, key: bytes, params: SearchQuery, compiled: CompiledQuery, *, dlq: bool,
    limit: int | None = None, **scan: Any,
) -> search.SearchPage:
    """One page of the search ``params`` ask for (``compiled`` from their ``q``), as the request's user sees
    the stream: the API's and the search page's one call (``limit`` overrides the query's; ``scan``, the
    page's step budget, goes to :func:`streams_app.search.search_page` as is)."""
    return search.search_page(
        conn,
        key,
        compiled,
        start=params.from_,
        end=params.to,
        direction=params.direction,
        cursor=params.cursor,
        limit=params.limit if limit is None else limit,
        dlq=dlq,
        mask=search_mask(request.user, conn, key),
        **scan,
    )


@api_endpoint(
    method="GET",
    summary="Search a stream's entries (CEL expression or plain text)",
    tag="streams",
    query=SearchQuery,
    replies={200: SearchReply},
)
def stream_search(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    """A bad expression is a 400 naming the parser's complaint; a DLQ's entries also have ``error``,
    ``traceback``, ``retries``, ``origin``, ``original_id``, ``failed_at`` and ``group``."""
    client.connection(conn)
    params = search_params(request)
    compiled = search.compile_query(params.q)
    page = search_by_params(request, conn, key, params, compiled, dlq=conventions.detect_dlq(key) is not None)
    return JsonResponse(
        {
            "matches": [presenters.entry_json(conn, key, e) for e in page.matches],
            "scanned": page.scanned,
            "total": page.total,
            "from_id": page.first_id,
            "to_id": page.last_id,
            "next": page.next,
            "complete": page.complete,
            "elapsed_ms": page.elapsed_ms,
            "too_costly": page.too_costly,
        }
    )
