"""Search on the stream page and the DLQ page: results that arrive as they are found.

The page's search box is a GET form: the query is in the page's URL, and the page holds a results
section whose placeholder asks this view for the first step (``hx-trigger="load"``). Each step scans a
slice of the run's budget (:data:`STEP_ENTRIES` entries or :data:`STEP_MS`) and answers with the
matches it found, the status line ("scanned N of M entries, from ID a to ID b, k matches", swapped in
out of band) and, while the run's budget (:data:`~streams_app.search.BUDGET_ENTRIES` entries,
:data:`~streams_app.search.BUDGET_MS`) and its ``limit`` allow, a placeholder for the next step, which
loads at once: the chain streams results to the page without a line of script. When the run stops
before the range's end, the status line offers "Continue": the page's URL with the cursor, a new run.

The run's counters (``seen``, ``found``, ``first``, ``spent``, ``costly``) travel in the steps' URLs: they
only feed the status line. So do ``until`` and ``total``, the newest entry and the length of the stream
when the run's first step began (:mod:`streams_app.search.scan`): every step stops at that entry, so
"scanned N of M" counts against one figure and N never passes M, however the stream grows or is trimmed
meanwhile. A request without htmx (a bookmarked step) gets the same step as a whole page.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from eventbus.text import display_text
from streams_app import search
from streams_app.redis_ops import conventions
from streams_app.redis_ops.errors import InvalidArgument
from streams_app.views import links
from streams_app.views.api.schemas import CursorId, Query, parse, query_int
from streams_app.views.api.search import SearchQuery, search_by_params, search_params
from streams_app.views.common import connection_context, is_htmx
from streams_app.views.presenters import entry_view

STEP_ENTRIES = 20_000
STEP_MS = 400
_I32 = 2**31 - 1


class RunState(Query):
    """What earlier steps of the run covered, for the status line."""

    seen: query_int(ge=0, le=_I32) = 0  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    found: query_int(ge=0, le=_I32) = 0  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    spent: query_int(ge=0, le=_I32) = 0  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    costly: query_int(ge=0, le=_I32) = 0  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    first: CursorId | None = None
    until: CursorId | None = None
    total: query_int(ge=0, le=2**63 - 1) | None = None  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type


def _query_string(params: SearchQuery, **extra: object) -> str:
    values = {
        "q": params.q,
        "from": params.from_,
        "to": params.to,
        "direction": params.direction,
        "limit": params.limit if params.limit != search.DEFAULT_LIMIT else None,
        **extra,
    }
    return urlencode({name: value for name, value in values.items() if value not in (None, "")})


def _step(request: HttpRequest, conn: str, key: bytes, *, page_url: str, dlq: bool) -> HttpResponse:
    """One step of the run the request's counters describe (module docstring)."""
    context = connection_context(request, conn)
    context.update(key=key, key_text=display_text(key), page_url=page_url)
    try:
        params = search_params(request, forms=True)
        state = parse(
            RunState, {name: request.GET[name] for name in RunState.model_fields if name in request.GET}
        )
        compiled = search.compile_query(params.q)
        page = search_by_params(
            request,
            conn,
            key,
            params,
            compiled,
            limit=max(1, params.limit - state.found),
            dlq=dlq,
            budget_entries=min(STEP_ENTRIES, max(1, search.BUDGET_ENTRIES - state.seen)),
            budget_ms=max(1, min(STEP_MS, search.BUDGET_MS - state.spent)),
            until=state.until if state.total is not None else None,
            total=state.total if state.until is not None else None,
        )
    except InvalidArgument as exc:  # shown in the status line: htmx swaps no 4xx answer in
        context["error"] = exc.message
        return _render(request, context)
    seen, found = state.seen + page.scanned, state.found + len(page.matches)
    spent = state.spent + page.elapsed_ms
    costly = state.costly + page.too_costly
    first = state.first or page.first_id
    run_over = seen >= search.BUDGET_ENTRIES or spent >= search.BUDGET_MS or found >= params.limit
    context.update(
        hits=[entry_view(conn, key, e) for e in page.matches],
        seen=seen,
        found=found,
        total=page.total,
        too_costly=costly,
        first=first,
        last=page.last_id or params.cursor,
        complete=page.complete,
        query=params.q,
        is_text=compiled.is_text,
        more_url=None
        if page.complete or run_over
        else (
            f"{page_url}search/?"
            + _query_string(
                params,
                cursor=page.next,
                seen=seen,
                found=found,
                spent=spent,
                costly=costly or None,
                first=first,
                until=page.until,
                total=page.total,
            )
        ),
        requeue_url=f"{links.dlq_url(conn, key)}search/requeue/confirm/?{urlencode({'q': params.q})}"
        if dlq and found and (page.complete or run_over)
        else None,
        replay_url=f"{links.stream_url(conn, key)}search/replay/confirm/?"
        + urlencode({k: v for k, v in {"q": params.q, "start": params.from_, "end": params.to}.items() if v})
        if not dlq and found and (page.complete or run_over)
        else None,
        continue_url=f"{page_url}?{_query_string(params, cursor=page.next)}#search"
        if run_over and not page.complete
        else None,
    )
    return _render(request, context)


def _render(request: HttpRequest, context: dict) -> HttpResponse:
    if is_htmx(request):
        return render(request, "streams_app/_search_results.html", context)
    return render(request, "streams_app/search.html", context)


@require_GET
def stream_search(request: HttpRequest, conn: str, key: bytes) -> HttpResponse:
    """One step of a search of a stream (a DLQ's entries get its parsed fields as variables too)."""
    return _step(
        request, conn, key, page_url=links.stream_url(conn, key), dlq=conventions.detect_dlq(key) is not None
    )


@require_GET
def dlq_search(request: HttpRequest, conn: str, key: bytes) -> HttpResponse:
    """One step of a search of a DLQ, from its page."""
    return _step(request, conn, key, page_url=links.dlq_url(conn, key), dlq=True)
