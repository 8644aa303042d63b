"""The read side of the JSON API (docs/api.md#addresses): same access layer, same shapes as the pages.

Query strings are read by the models of :mod:`streams_app.views.api.schemas`; each view declares
what it takes and answers with ``@api_endpoint`` (the OpenAPI document is built from that).
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.utils import timezone

from eventbus.conventions import is_internal_stream
from streams_app.metrics import mirror
from streams_app.redis_ops import client
from streams_app.redis_ops.errors import InvalidArgument
from streams_app.redis_ops.reads import entries as entry_reads
from streams_app.redis_ops.reads import groups as group_reads
from streams_app.redis_ops.reads import pending as pending_reads
from streams_app.redis_ops.reads import streams as stream_reads
from streams_app.redis_ops.types import StreamSummary
from streams_app.views import presenters
from streams_app.views import streams as streams_view
from streams_app.views.api import replies
from streams_app.views.api.endpoint import api_endpoint
from streams_app.views.api.schemas import (
    ConsumersQuery,
    EntriesQuery,
    GroupsQuery,
    PendingQuery,
    StreamsQuery,
    query,
)
from streams_app.views.masking import request_masker


@api_endpoint(method="GET", summary="List the Redis connections and their health", tag="streams",
              replies={200: replies.ConnectionsReply})
def connections(request: HttpRequest) -> JsonResponse:
    """Every connection of ``BUS_REDIS_URLS`` (never its password), with PING's answer."""
    out = []
    for c in client.connections():
        health = client.health(c.name)
        out.append(
            {"name": c.name, "host": c.host, "port": c.port, "db": c.db, "ok": health.ok,
             "redis_version": health.redis_version, "server": health.server, "error": health.error}
        )
    return JsonResponse({"connections": out})


@api_endpoint(method="GET", summary="List streams (SCAN ... TYPE stream, or the mirror when sorted)", tag="streams",
              query=StreamsQuery, replies={200: replies.StreamsReply})
def streams(request: HttpRequest, conn: str) -> JsonResponse:
    """One page of the connection's streams: in scan order over every primary, or ranked (``sort``) from
    the mirror like the streams page, so the ranking covers every stream and not one scan budget's worth.

    ``complete`` is false when primaries of a cluster did not answer; ``missed`` names them.
    """
    client.connection(conn)
    params = query(StreamsQuery, request.GET)
    match = params.match.encode()
    if params.sort:
        return JsonResponse(_sorted_streams(conn, params))
    page = stream_reads.streams_scan(conn, match=match, cursor=params.cursor, count=params.count)
    return JsonResponse(
        {
            "streams": [_stream_row(conn, s) for s in page.streams],
            "next_cursor": page.next_cursor or None,
            "complete": page.complete,
            "missed": list(page.missed),
        }
    )


def _sorted_streams(conn: str, params: StreamsQuery) -> dict[str, object]:
    """``sort`` served from the mirror (the page's rows, live figures where Redis answers); before its
    first sync, ``length`` ranks one scan budget's streams and says so, the other sorts are refused."""
    page = mirror.stream_mirror_page(
        conn=conn, match=params.match, sort=params.sort or "", offset=params.offset, count=params.count
    )
    if page is not None:
        shown = streams_view.mirror_rows(conn, page)
        stale_after = timedelta(seconds=3 * settings.BUSCONSOLE_MIRROR_INTERVAL_S)
        return {
            "streams": [{**_stream_row(conn, row["s"]), "live": row["live"]} for row in shown["rows"]],
            "source": "mirror",
            "total": page.total,
            "next_offset": shown["next_offset"],
            "as_of": page.as_of.isoformat() if page.as_of else None,
            "stale": page.as_of is None or timezone.now() - page.as_of > stale_after,
            "complete": not shown["missed"] and not shown["live_error"],
            "missed": list(shown["missed"]),
            "filling": {"synced": page.filling[0], "about": page.filling[1]} if page.filling else None,
        }
    if params.sort != "length":
        raise InvalidArgument(
            f"sort={params.sort} ranks the mirror, which holds nothing for {conn!r} yet: it is filled by the "
            f"mirror sync every {settings.BUSCONSOLE_MIRROR_INTERVAL_S} s. Until then only sort=length answers.",
            conn=conn,
        )
    ranked = stream_reads.streams_by_length(conn, match=params.match.encode(), count=params.count, offset=params.offset)
    more = params.offset + len(ranked.streams) < ranked.sorted_among
    return {
        "streams": [_stream_row(conn, s) for s in ranked.streams],
        "next_offset": params.offset + len(ranked.streams) if more else None,
        "sorted_among": ranked.sorted_among,
        "scan_complete": ranked.scan_complete,
        "source": "scan",
        "mirror": "empty",
        "complete": not ranked.missed,
        "missed": list(ranked.missed),
    }


def _stream_row(conn: str, s: StreamSummary) -> dict[str, object]:
    """A streams-list row as the page shows it: its lag (a lower bound when ``lag_exact`` is false, null when
    no group reports one, never 0 for unknown), and whether it is internal."""
    return {**presenters.stream_summary_json(conn, s),
            **presenters.lag_json(s.lag, groups=s.groups, unknown=s.lag_unknown_groups),
            "lag_unknown": s.lag_unknown, "internal": is_internal_stream(s.key)}


@api_endpoint(method="GET", summary="One stream: XINFO STREAM and its groups", tag="streams",
              replies={200: replies.StreamReply})
def stream(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    client.connection(conn)
    return JsonResponse(presenters.stream_info_json(conn, stream_reads.stream_info(conn, key)))


@api_endpoint(method="GET", summary="Page through a stream's entries", tag="streams", query=EntriesQuery,
              replies={200: replies.EntriesReply})
def entries(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    """Entries newest first (or ``order=asc``), each field as text and decoded (JSON, msgpack, ...)."""
    client.connection(conn)
    params = query(EntriesQuery, request.GET)
    masker = request_masker(request, conn, key)
    page = entry_reads.entries_page(
        conn, key, order=params.order, after=params.after, before=params.before, at=params.at, count=params.count,
        mask=masker.entry,
    )
    reply = {
        "entries": [presenters.entry_json(conn, key, e) for e in page.entries],
        "next": page.next,
        "prev": page.prev,
    }
    masker.reveal_record()
    return JsonResponse(reply)


@api_endpoint(method="GET", summary="A group's pending entries (XPENDING)", tag="groups", query=PendingQuery,
              replies={200: replies.PendingReply})
def pending(request: HttpRequest, conn: str, key: bytes, group: bytes) -> JsonResponse:
    """The summary and one page of the pending list, each entry marked if it still exists, with a short
    preview of its message (masked; null when the message was deleted)."""
    client.connection(conn)
    params = query(PendingQuery, request.GET)
    masker = request_masker(request, conn, key)
    page, messages = pending_reads.pending_page_messages(
        conn, key, group, consumer=params.consumer.encode() if params.consumer else None,
        min_idle_ms=params.min_idle_ms, after=params.after, count=params.count, mask=masker.entry,
    )
    body = presenters.pending_json(page.summary, page.entries, page.next, presenters.pending_previews(messages))
    longest = pending_reads.pending_longest_idle(conn, key, group, pending=page.summary.count) if page.summary.count else None
    body["summary"]["longest_idle"] = presenters.pending_idle_json(longest)
    masker.reveal_record()
    return JsonResponse(body)


@api_endpoint(method="GET", summary="A stream's consumer groups (XINFO GROUPS), one page", tag="groups",
              query=GroupsQuery, replies={200: replies.GroupsReply})
def groups(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    """The most pending groups first unless ``sort`` and ``order`` say otherwise."""
    client.connection(conn)
    params = query(GroupsQuery, request.GET)
    page = group_reads.groups_page(conn, key, sort=params.sort, order=params.order, offset=params.offset,
                             count=params.count)
    return JsonResponse({"groups": [presenters.group_json(g) for g in page.rows], **_ranked(page)})


@api_endpoint(method="GET", summary="A group's consumers (XINFO CONSUMERS), one page", tag="groups",
              query=ConsumersQuery, replies={200: replies.ConsumersReply})
def consumers(request: HttpRequest, conn: str, key: bytes, group: bytes) -> JsonResponse:
    """The consumers owning the most pending entries first unless ``sort`` and ``order`` say otherwise."""
    client.connection(conn)
    params = query(ConsumersQuery, request.GET)
    page = group_reads.consumers_page(conn, key, group, sort=params.sort, order=params.order, offset=params.offset,
                                count=params.count)
    return JsonResponse(
        {
            "consumers": [
                {"name": presenters.key_text(c.name), "pending": c.pending, "idle_ms": c.idle_ms,
                 "inactive_ms": c.inactive_ms}
                for c in page.rows
            ],
            **_ranked(page),
        }
    )


def _ranked(page: group_reads.RowsPage) -> dict[str, object]:
    """Where a ranked page sits in its list, the same for groups and consumers."""
    return {"total": page.total, "offset": page.offset, "next_offset": page.next_offset, "sort": page.sort,
            "order": page.order}
