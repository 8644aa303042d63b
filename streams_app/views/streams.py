"""The streams of one connection.

Two modes. Once the metadata mirror holds the connection, the list is filtered (glob or
substring), sorted (name, length, pending, lag, last entry) and paged in the database, which scales to
servers with more streams than a SCAN page can sort, and the rows on screen get live figures from one
pipelined read. Until then (a fresh install), or with ``?live=1``, it pages by SCAN cursor over Redis
(over every primary of a cluster, one after another).

Both modes show each stream's lag, the largest of its groups' (read live with the other figures). When
Redis cannot tell some group's lag, the largest it does tell is shown as a lower bound ("≥ 4012, 1 group
unknown") and "most lag first" ranks by it; a stream whose every group's lag is unknown shows "unknown"
(never 0) and comes after the figures, before the streams without a group (:data:`mirror.MIRROR_SORTS`).
Streams the event bus keeps for itself (its metrics streams) carry an "internal" pill.

Either way a page that could not reach every primary says so: ``missed`` names the nodes whose
streams are absent (a scan) or shown with the mirror's figures instead of live ones (the mirror).

**Family mode** (docs/operations.md#stream-families): when the newest stored family rows say the
connection holds more than ``BUSCONSOLE_FAMILY_MODE_KEYS`` keys, the page first lists its families, at
most :data:`FAMILY_ROWS` of them (most keys first, filtered by the same ``match``), each linking to its
members page, with a link to every family; the per-stream rows below are the mirror's, which in that
mode holds only the members that matter. Both are read from the database, so the page's size and time
stay bounded whatever the number of keys.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from eventbus.conventions import is_internal_stream
from streams_app.metrics import family_rows as stored
from streams_app.metrics import mirror
from streams_app.redis_ops import commands
from streams_app.redis_ops.errors import OpsError
from streams_app.redis_ops.reads import streams as stream_reads
from streams_app.redis_ops.types import StreamSummary
from streams_app.views.common import connection_context, render_screen
from streams_app.views.families import stored_row
from streams_app.views.forms import StreamsForm, validated
from streams_app.views.presenters import dlq_convention

#: Families the streams page lists in family mode; the families page pages through the rest.
FAMILY_ROWS = 25


@require_GET
def streams_list(request: HttpRequest, conn: str) -> HttpResponse:
    context = connection_context(request, conn)
    params = validated(StreamsForm, request.GET)
    if not params["live"]:
        context.update(family_mode_rows(conn, params["match"], offset=params["families_offset"]))
        page = mirror.stream_mirror_page(
            conn=conn, match=params["match"], sort=params["sort"], offset=params["offset"], count=params["count"]
        )
        if page is not None:
            context.update(mirror_rows(conn, page), params=params, mode="mirror")
            return render_screen(request, "streams_app/streams.html", context, partial="streams-table")
    match = params["match"].encode()
    if params["sort"] == "length":
        ranked = stream_reads.streams_by_length(conn, match=match, count=params["count"], offset=params["offset"])
        rows, next_cursor, missed = list(ranked.streams), None, ranked.missed
        more = params["offset"] + len(rows) < ranked.sorted_among
        context.update(
            sorted_among=ranked.sorted_among, scan_complete=ranked.scan_complete,
            next_offset=params["offset"] + params["count"] if more else None,
        )
    else:
        scan = stream_reads.streams_scan(conn, match=match, cursor=params["cursor"], count=params["count"])
        rows, next_cursor, missed = list(scan.streams), scan.next_cursor or None, scan.missed
    context.update(
        missed=missed,
        params=params,
        rows=[_row(s) for s in rows],
        next_cursor=next_cursor,
        scan_budget=settings.BUSCONSOLE_SCAN_BUDGET,
        mode="live",
    )
    return render_screen(request, "streams_app/streams.html", context, partial="streams-table")


def family_mode_rows(conn: str, match: str, *, offset: int = 0) -> dict:
    """The family section of the page in family mode (empty otherwise): one page of family rows."""
    found = stored.family_rows(conn, offset=offset, count=FAMILY_ROWS, match=match)
    if found is None:
        under_way = stored.pass_under_way(conn)
        if under_way is None or not under_way.family_mode:
            return {"family_mode": False}
        return {"family_mode": True, "families": None, "family_rows": [], "under_way": under_way,
                "mode_keys": settings.BUSCONSOLE_FAMILY_MODE_KEYS}
    if not found.family_mode:
        return {"family_mode": False}
    rows = [stored_row(conn, sample) for sample in found.rows]
    return {
        "family_mode": True, "families": found, "family_rows": rows,
        "families_shown": (offset + 1 if rows else 0, offset + len(rows)),
        "families_next": offset + FAMILY_ROWS if offset + FAMILY_ROWS < found.total else None,
        "families_prev": max(0, offset - FAMILY_ROWS) if offset else None,
        "mode_keys": settings.BUSCONSOLE_FAMILY_MODE_KEYS,
    }


def _row(s: StreamSummary, **more: object) -> dict:
    """One row of the list: the stream's figures, its DLQ convention and whether it is the bus's own."""
    return {"s": s, "dlq": dlq_convention(s.key), "internal": is_internal_stream(s.key),
            "lag": s.lag, **more}


def mirror_rows(conn: str, page: mirror.MirrorPage) -> dict:
    """The page's rows with live figures where Redis has them (mirror figures, flagged, where not).

    Also serves the API's sorted list (:mod:`streams_app.views.api.read`), so both show the same rows.
    """
    keys = [m.key_bytes for m in page.rows]
    missed: tuple[str, ...] = ()
    try:
        summaries, missed = stream_reads.stream_summaries_covered(conn, keys)
        live = {s.key: s for s in summaries}
        live_error = None
    except OpsError as exc:  # the mirror still answers when the server does not
        live, live_error = {}, exc.message
    unread = set(missed)
    rows = []
    for m in page.rows:
        s = live.get(m.key_bytes)
        rows.append(_row(
            s or StreamSummary(
                key=m.key_bytes, length=m.length, first_id=m.first_id, last_id=m.last_id,
                last_generated_id=m.last_generated_id, groups=m.groups_count, pending=m.pending, lag=m.lag,
                lag_unknown_groups=m.lag_unknown_groups,
            ),
            live=s is not None,
            # not read live because its node did not answer (not "gone")
            unread=s is None and bool(unread) and commands.node_of(conn, m.key_bytes) in unread,
        ))
    offset, count = page.offset, page.count
    return {
        "rows": rows,
        "total": page.total,
        "as_of": page.as_of,
        "filling": page.filling,
        "live_error": live_error,
        "missed": missed,
        "first_shown": offset + 1 if rows else 0,
        "last_shown": offset + len(rows),
        "next_offset": offset + count if offset + count < page.total else None,
        "prev_offset": max(0, offset - count) if offset else None,
        "next_cursor": None,
    }
