"""The read side of the JSON API (SPEC section 4): same access layer, same shapes as the pages."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from streams_app.redis_ops import client, reads
from streams_app.views import presenters
from streams_app.views.forms import EntriesForm, PendingForm, StreamsForm, validated


@require_GET
def connections(request: HttpRequest) -> JsonResponse:
    out = []
    for c in client.connections():
        health = client.health(c.name)
        out.append(
            {"name": c.name, "host": c.host, "port": c.port, "db": c.db, "ok": health.ok,
             "redis_version": health.redis_version, "error": health.error}
        )
    return JsonResponse({"connections": out})


@require_GET
def streams(request: HttpRequest, conn: str) -> JsonResponse:
    client.connection(conn)
    params = validated(StreamsForm, request.GET)
    match = params["match"].encode()
    if params["sort"] == "length":
        rows, seen, complete = reads.streams_by_length(
            conn, match=match, count=params["count"], offset=params["offset"]
        )
        more = params["offset"] + len(rows) < seen
        return JsonResponse(
            {
                "streams": [presenters.stream_summary_json(conn, s) for s in rows],
                "next_offset": params["offset"] + len(rows) if more else None,
                "sorted_among": seen,
                "scan_complete": complete,
            }
        )
    page = reads.streams_scan(conn, match=match, cursor=params["cursor"], count=params["count"])
    return JsonResponse(
        {
            "streams": [presenters.stream_summary_json(conn, s) for s in page.streams],
            "next_cursor": page.next_cursor or None,
        }
    )


@require_GET
def stream(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    client.connection(conn)
    return JsonResponse(presenters.stream_info_json(conn, reads.stream_info(conn, key)))


@require_GET
def entries(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    client.connection(conn)
    params = validated(EntriesForm, request.GET)
    page = reads.entries_page(
        conn, key, order=params["order"], after=params["after"], before=params["before"],
        at=params["at"], count=params["count"],
    )
    return JsonResponse(
        {
            "entries": [presenters.entry_json(conn, key, e) for e in page.entries],
            "next": page.next,
            "prev": page.prev,
        }
    )


@require_GET
def pending(request: HttpRequest, conn: str, key: bytes, group: bytes) -> JsonResponse:
    client.connection(conn)
    params = validated(PendingForm, request.GET)
    consumer = params["consumer"].encode() if params["consumer"] else None
    page = reads.pending_page(
        conn, key, group, consumer=consumer, min_idle_ms=params["min_idle_ms"],
        after=params["after"], count=params["count"],
    )
    return JsonResponse(presenters.pending_json(page.summary, page.entries, page.next))


@require_GET
def groups(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    client.connection(conn)
    return JsonResponse({"groups": [presenters.group_json(g) for g in reads.groups(conn, key)]})


@require_GET
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
