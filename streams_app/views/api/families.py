"""Stream families in the JSON API (docs/api.md#stream-families): the rows of the newest snapshot (or of
one bounded pass, asked for), and a family's members, paged; the same rows as the families page
(:mod:`streams_app.views.families`)."""

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


@api_endpoint(method="GET", summary="Streams summed by family, as of the newest snapshot", tag="streams",
              query=FamiliesQuery, replies={200: replies.FamiliesReply})
def families(request: HttpRequest, conn: str) -> JsonResponse:
    """Each family's keys, entries, groups, pending entries, DLQ depth, oldest and newest entry and busiest
    members, as the newest snapshot stored them (no Redis command); with ``now``, among the keys one pass
    of at most ``BUSCONSOLE_FAMILY_SCAN_BUDGET`` looks at now."""
    client.connection(conn)
    params = query(FamiliesQuery, request.GET)
    context = families_context(conn, offset=params.offset, count=params.count, run_pass=params.now)
    rows = [
        {**row, "api_url": f"/api/v1{row['url']}" if row["url"] else None} for row in context["rows"]
    ]
    body = {"source": context["source"], "families": rows, "total": context["total"],
            "next_offset": context["next_offset"]}
    if context["source"] == "snapshot":
        found = context["stored"]
        body |= {"as_of": found.at.isoformat(), "streams": found.keys, "looked_at": found.looked_at,
                 "keys_total": found.keys_total, "complete": found.complete, "missed": [],
                 "members_left_out": context["members_left_out"]}
    elif context["source"] == "pass":
        scan = context["scan"]
        body |= {"as_of": None, "streams": scan.streams, "looked_at": scan.looked_at,
                 "keys_total": scan.keys_total, "complete": scan.complete and not scan.missed,
                 "missed": list(scan.missed)}
    else:  # no rows yet: what the first pass under way has looked at, if one is
        under_way = context["under_way"]
        body |= {"as_of": None, "streams": under_way.streams if under_way else 0,
                 "looked_at": under_way.looked_at if under_way else 0,
                 "keys_total": under_way.keys_total if under_way else None, "complete": False, "missed": []}
    return JsonResponse(body)


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
