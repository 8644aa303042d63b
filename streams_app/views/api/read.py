"""The read side of the JSON API (SPEC section 4): same access layer, same shapes as the pages.

Query strings are read by the models of :mod:`streams_app.views.api.schemas`; each view declares
what it takes and answers with ``@api_endpoint`` (the OpenAPI document is built from that).
"""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from streams_app.redis_ops import client, reads
from streams_app.views import presenters
from streams_app.views.api import replies
from streams_app.views.api.endpoint import api_endpoint
from streams_app.views.api.schemas import EntriesQuery, PendingQuery, StreamsQuery, query


@api_endpoint(method="GET", summary="List the Redis connections and their health", tag="streams",
              replies={200: replies.ConnectionsReply})
def connections(request: HttpRequest) -> JsonResponse:
    """Every connection of ``BUS_REDIS_URLS`` (never its password), with PING's answer."""
    out = []
    for c in client.connections():
        health = client.health(c.name)
        out.append(
            {"name": c.name, "host": c.host, "port": c.port, "db": c.db, "ok": health.ok,
             "redis_version": health.redis_version, "error": health.error}
        )
    return JsonResponse({"connections": out})


@api_endpoint(method="GET", summary="List streams (SCAN ... TYPE stream)", tag="streams", query=StreamsQuery,
              replies={200: replies.StreamsReply})
def streams(request: HttpRequest, conn: str) -> JsonResponse:
    """One page of the connection's streams, in scan order or the longest first (``sort=length``)."""
    client.connection(conn)
    params = query(StreamsQuery, request.GET)
    match = params.match.encode()
    if params.sort == "length":
        rows, seen, complete = reads.streams_by_length(conn, match=match, count=params.count, offset=params.offset)
        more = params.offset + len(rows) < seen
        return JsonResponse(
            {
                "streams": [presenters.stream_summary_json(conn, s) for s in rows],
                "next_offset": params.offset + len(rows) if more else None,
                "sorted_among": seen,
                "scan_complete": complete,
            }
        )
    page = reads.streams_scan(conn, match=match, cursor=params.cursor, count=params.count)
    return JsonResponse(
        {
            "streams": [presenters.stream_summary_json(conn, s) for s in page.streams],
            "next_cursor": page.next_cursor or None,
        }
    )


@api_endpoint(method="GET", summary="One stream: XINFO STREAM and its groups", tag="streams",
              replies={200: replies.StreamReply})
def stream(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    client.connection(conn)
    return JsonResponse(presenters.stream_info_json(conn, reads.stream_info(conn, key)))


@api_endpoint(method="GET", summary="Page through a stream's entries", tag="streams", query=EntriesQuery,
              replies={200: replies.EntriesReply})
def entries(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    """Entries newest first (or ``order=asc``), each field as text and decoded (JSON, msgpack, ...)."""
    client.connection(conn)
    params = query(EntriesQuery, request.GET)
    page = reads.entries_page(
        conn, key, order=params.order, after=params.after, before=params.before, at=params.at, count=params.count
    )
    return JsonResponse(
        {
            "entries": [presenters.entry_json(conn, key, e) for e in page.entries],
            "next": page.next,
            "prev": page.prev,
        }
    )


@api_endpoint(method="GET", summary="A group's pending entries (XPENDING)", tag="groups", query=PendingQuery,
              replies={200: replies.PendingReply})
def pending(request: HttpRequest, conn: str, key: bytes, group: bytes) -> JsonResponse:
    """The summary and one page of the pending list, each entry marked if it still exists."""
    client.connection(conn)
    params = query(PendingQuery, request.GET)
    page = reads.pending_page(
        conn, key, group, consumer=params.consumer.encode() if params.consumer else None,
        min_idle_ms=params.min_idle_ms, after=params.after, count=params.count,
    )
    return JsonResponse(presenters.pending_json(page.summary, page.entries, page.next))


@api_endpoint(method="GET", summary="A stream's consumer groups (XINFO GROUPS)", tag="groups",
              replies={200: replies.GroupsReply})
def groups(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    client.connection(conn)
    return JsonResponse({"groups": [presenters.group_json(g) for g in reads.groups(conn, key)]})


@api_endpoint(method="GET", summary="A group's consumers (XINFO CONSUMERS)", tag="groups",
              replies={200: replies.ConsumersReply})
def consumers(request: HttpRequest, conn: str, key: bytes, group: bytes) -> JsonResponse:
    client.connection(conn)
    return JsonResponse(
        {
            "consumers": [
                {"name": presenters.key_text(c.name), "pending": c.pending, "idle_ms": c.idle_ms,
                 "inactive_ms": c.inactive_ms}
                for c in reads.consumers(conn, key, group)
            ]
        }
    )
