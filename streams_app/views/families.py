"""Stream families of one connection (docs/operations.md#stream-families): one row per family, and a
family's members, paged by SCAN cursor, each linking to its stream.

The rows are the snapshot's: the newest :class:`~streams_app.metrics.models.FamilySample` rows of the
connection (:mod:`streams_app.metrics.family_rows`), read from the database with no Redis command, "as of"
the tick that made them, saying "looked at N of M keys" when that pass stopped at its budget. Before the
first snapshot there are none, and the page says so; ``?now=1`` then runs one bounded pass now
(:func:`streams_app.redis_ops.reads.families.families_read`, at most ``BUSCONSOLE_FAMILY_SCAN_BUDGET``
keys, with its own "looked at N of M"), asked for, never on every request. The members page is a
bounded SCAN MATCH of the family's glob. The JSON API's view is :mod:`streams_app.views.api.families`;
both show the rows built here.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from eventbus.families import FamilyRow
from eventbus.text import display_text
from streams_app.metrics import family_rows as stored
from streams_app.metrics.models import FamilySample, name_hash
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
        "rate_per_s": None,
        "busiest": [{"key": display_text(key), "url": stream_url(conn, key), "length": length}
                    for key, length in row.busiest],
    }


def stored_row(conn: str, sample: FamilySample) -> dict[str, Any]:
    """One stored family row as the page and the API show it (the same keys as :func:`family_row`).

    The row keeps display texts: a link is made only where the text gives back the exact bytes (the
    family's glob checked against its stored digest; a member's key when its text escapes nothing)."""
    pattern = sample.family.encode()
    url = family_url(conn, pattern) if name_hash(pattern) == sample.family_hash else None
    busiest = [
        {"key": m["key"], "url": _exact_stream_url(conn, m["key"]), "length": m["length"]}
        for m in (sample.busiest or [])
    ]
    own = sample.kind == "key"
    return {
        "name": sample.family, "pattern": sample.family, "kind": sample.kind, "url": url,
        "stream_url": busiest[0]["url"] if own and busiest else None,
        "keys": sample.keys, "entries": sample.entries, "groups": sample.groups, "pending": sample.pending,
        "dlq_depth": sample.dlq_depth, "dlq_keys": sample.dlq_keys,
        "oldest_id": sample.oldest_id or None, "newest_id": sample.newest_id or None,
        "rate_per_s": sample.rate_per_s, "busiest": busiest,
    }


def _exact_stream_url(conn: str, text: str) -> str | None:
    # display_text writes every byte it cannot show as a backslash escape: without one, the text is the key
    return stream_url(conn, text.encode()) if "\\" not in text else None


def paging(offset: int, count: int, shown: int, total: int) -> dict[str, Any]:
    more = offset + count < total
    return {
        "total": total,
        "first_shown": offset + 1 if shown else 0,
        "last_shown": offset + shown,
        "next_offset": offset + count if more else None,
        "prev_offset": max(0, offset - count) if offset else None,
    }


def families_context(conn: str, *, offset: int, count: int, run_pass: bool = False) -> dict[str, Any]:
    """One page of the newest stored rows (``source`` "snapshot"); with ``run_pass``, or before any
    snapshot when asked, one bounded pass now (``source`` "pass"); else nothing yet (``source`` "none")."""
    if not run_pass:
        found = stored.family_rows(conn, offset=offset, count=count)
        if found is None:
            return {"source": "none", "rows": [], "scan_budget": settings.BUSCONSOLE_FAMILY_SCAN_BUDGET,
                    "under_way": stored.pass_under_way(conn), **paging(offset, count, 0, 0)}
        return {
            "source": "snapshot", "stored": found, "as_of": found.at,
            "stored_budget": settings.BUSCONSOLE_FAMILY_SCAN_BUDGET,
            "rows": [stored_row(conn, sample) for sample in found.rows],
            "members_left_out": stored.members_left_out(conn) if found.family_mode else 0,
            "members_max": settings.BUSCONSOLE_FAMILY_MEMBERS_MAX,
            **paging(offset, count, len(found.rows), found.total),
        }
    scan = family_reads.families_read(conn)
    rows = scan.families[offset : offset + count]
    return {
        "source": "pass", "scan": scan, "rows": [family_row(conn, row) for row in rows],
        **paging(offset, count, len(rows), len(scan.families)),
    }


@require_GET
def families_list(request: HttpRequest, conn: str) -> HttpResponse:
    context = connection_context(request, conn)
    params = validated(FamiliesForm, request.GET)
    context.update(
        families_context(conn, offset=params["offset"], count=params["count"], run_pass=params["now"]),
        params=params,
    )
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
