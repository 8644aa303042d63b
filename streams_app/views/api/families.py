"""Stream families in the JSON API (docs/api.md#stream-families): the rows of one bounded pass, and a
family's members, paged; the same rows as the families page (:mod:`streams_app.views.families`)."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from eventbus.text import display_text
from streams_app.redis_ops import client
from streams_app.redis_ops.reads import families as family_reads
from streams_app.views import presenters
from streams_app.views.api import replies
from streams_app.views.api.endpoint import api_endpoint
from streams_app.views.api.schemas import FamiliesQuery, query
from streams_app.views.families import families_context


@api_endpoint(method="GET", summary="Streams summed by family, in one bounded pass over SCAN", tag="streams",
              query=FamiliesQuery, replies={200: replies.FamiliesReply})
def families(request: HttpRequest, conn: str) -> JsonResponse:
    """Each family's keys, entries, groups, pending entries, DLQ depth, oldest and newest entry and busiest
    members, among the keys one pass of at most ``BUSCONSOLE_FAMILY_SCAN_BUDGET`` looked at."""
    client.connection(conn)
    params = query(FamiliesQuery, request.GET)
    context = families_context(conn, offset=params.offset, count=params.count)
    found = context["scan"]
    rows = [
        {**row, "api_url": f"/api/v1{row['url']}" if row["url"] else None} for row in context["rows"]
    ]
    return JsonResponse({
        "families": rows, "total": context["total"], "next_offset": context["next_offset"],
        "streams": found.streams, "looked_at": found.looked_at, "keys_total": found.keys_total,
        "complete": found.complete and not found.missed, "missed": list(found.missed),
    })


@api_endpoint(method="GET", summary="One page of a family's streams", tag="streams", query=FamiliesQuery,
              replies={200: replies.FamilyMembersReply})
def family_members(request: HttpRequest, conn: str, family: bytes) -> JsonResponse:
    """The streams of the family whose glob is the path's segment, in scan order over every primary."""
    client.connection(conn)
    params = query(FamiliesQuery, request.GET)
    page = family_reads.family_members(conn, family, cursor=params.cursor, count=params.count)
    return JsonResponse({
        "name": page.family.name, "pattern": display_text(page.family.pattern), "kind": page.family.kind,
        "streams": [presenters.stream_summary_json(conn, s) for s in page.streams],
        "next_cursor": page.next_cursor or None, "scanned": page.scanned, "keys_total": page.keys_total,
        "complete": not page.missed, "missed": list(page.missed),
    })
