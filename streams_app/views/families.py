"""Stream families of one connection (docs/operations.md#stream-families): one row per family, and a
family's members, paged by SCAN cursor, each linking to its stream.

The rows come from one bounded pass (:func:`streams_app.redis_ops.reads.families.families_read`); the
page says "looked at N of M keys" when the pass stopped at its budget. The JSON API's view is
:mod:`streams_app.views.api.families`; both show the rows built here.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from eventbus.families import FamilyRow
from eventbus.text import display_text
from streams_app.redis_ops.reads import families as family_reads
from streams_app.views.common import connection_context, render_screen
from streams_app.views.forms import FamiliesForm, validated
from streams_app.views.links import LONG_SEGMENT, segment, stream_url


def family_url(conn: str, pattern: bytes) -> str | None:
    """The members page of a family (None for a glob too long to carry in a path)."""
    seg = segment(pattern)
    return f"/c/{conn}/families/{seg}/" if len(seg) <= LONG_SEGMENT else None


def family_row(conn: str, row: FamilyRow) -> dict[str, Any]:
    """One family as the page and the API show it."""
    family = row.family
    own = family.kind == "key"
    return {
        "name": family.name,
        "pattern": display_text(family.pattern),
        "kind": family.kind,
        "url": family_url(conn, family.pattern),
        # a family of one key is that stream: its row links there too
        "stream_url": stream_url(conn, row.busiest[0][0]) if own and row.busiest else None,
        "keys": row.keys,
        "entries": row.entries,
        "groups": row.groups,
        "pending": row.pending,
        "dlq_depth": row.dlq_depth,
        "dlq_keys": row.dlq_keys,
        "oldest_id": row.oldest_id,
        "newest_id": row.newest_id,
        "busiest": [{"key": display_text(key), "url": stream_url(conn, key), "length": length}
                    for key, length in row.busiest],
    }


def families_context(conn: str, *, offset: int, count: int) -> dict[str, Any]:
    """The pass, and one page of its rows, for the page and the API."""
    found = family_reads.families_read(conn)
    rows = found.families[offset : offset + count]
    more = offset + count < len(found.families)
    return {
        "scan": found,
        "rows": [family_row(conn, row) for row in rows],
        "total": len(found.families),
        "first_shown": offset + 1 if rows else 0,
        "last_shown": offset + len(rows),
        "next_offset": offset + count if more else None,
        "prev_offset": max(0, offset - count) if offset else None,
    }


@require_GET
def families_list(request: HttpRequest, conn: str) -> HttpResponse:
    context = connection_context(request, conn)
    params = validated(FamiliesForm, request.GET)
    context.update(families_context(conn, offset=params["offset"], count=params["count"]), params=params)
    return render_screen(request, "streams_app/families.html", context, partial="families-table")


@require_GET
def family_members(request: HttpRequest, conn: str, family: bytes) -> HttpResponse:
    context = connection_context(request, conn)
    params = validated(FamiliesForm, request.GET)
    page = family_reads.family_members(conn, family, cursor=params["cursor"], count=params["count"])
    context.update(
        page=page, params=params, family_name=page.family.name, pattern=display_text(family),
        rows=[{"s": s, "url": stream_url(conn, s.key)} for s in page.streams],
        next_cursor=page.next_cursor or None,
    )
    return render_screen(request, "streams_app/family.html", context, partial="members-table")
