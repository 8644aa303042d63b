"""Parts of the stream and DLQ pages built in Python: ``{% load stream_parts %}`` then ``{% stream_title %}``,
``{% stream_links %}``, ``{% stream_facts %}`` and ``{% entries_pager %}`` (the stream page's crumbs and
heading, its links, facts and the entries' newer and older links), ``{% export_form %}`` and
``{% search_box page_url %}`` (the export form and the search box of the stream and DLQ pages).

Each was template markup on every stream page: the facts some thirty nodes (a filter or an ``if`` per
value), the export form and the search box inclusion tags, each with a context and a template render of
its own for markup that is almost all fixed text (the search language's help stays a template, rendered
once). Here the fixed text is a format string and every value goes through
:func:`django.utils.html.format_html`, which escapes it as autoescaping does (``conditional_escape``);
numbers are localised first, as a template shows them (:func:`django.utils.formats.localize`). The CSRF
field is Django's own tag's output. Each part is held to the markup it replaced by
``tests/console/views/test_stream_page_parts.py``, and the whole page byte for byte by
``tests/console/views/test_stream_page_one_read.py``.
"""

from __future__ import annotations

import functools
from typing import Any

from django import template
from django.conf import settings
from django.template import Context, Engine
from django.template.defaulttags import CsrfTokenNode
from django.utils.formats import localize
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from streams_app.redis_ops.types import StreamInfo
from streams_app.templatetags.console import idtime_text, nav_url, query, time_now
from streams_app.templatetags.figures import lag_figure
from streams_app.views import links

register = template.Library()

_TITLE = """<nav class="crumbs"><a href="{overview}">Overview</a> › <a href="{streams}">{conn}</a> › <span class="mono">{key_text}</span></nav>
<div class="page-head">
  <h1 class="mono">{key_text}{dlq}</h1>"""
_LINKS = """{dlq}
    <a class="button" href="tail/">Live tail</a>
    <a class="button subtle" href="{page}retries/" data-action="retries">Retries</a>
    <a class="button subtle" href="{page}timeline/" data-action="timeline" title="DLQ depth, lag, alerts, operator actions and annotations of this stream on one time axis">Timeline</a>
    <a class="button subtle" href="{page}add/" data-action="add-entry">Add entry</a>
    <a class="button subtle" href="{api}">JSON</a>"""


@register.simple_tag(takes_context=True)
def stream_title(context: template.Context) -> SafeString:
    """The crumbs (overview, connection, stream) and the heading, with the DLQ convention when the stream
    is a dead-letter queue; opens the ``page-head`` block the page closes."""
    conn, dlq = context["conn"], context.get("dlq")
    return format_html(
        _TITLE,
        overview=nav_url("overview"),
        streams=nav_url("streams", conn=conn),
        conn=conn,
        key_text=context["key_text"],
        dlq=format_html(' <span class="pill warn">DLQ · {}</span>', dlq) if dlq else "",
    )


@register.simple_tag(takes_context=True)
def stream_links(context: template.Context) -> SafeString:
    """The stream's own pages: its dead-letter view when it is a DLQ, the live tail, retries, timeline,
    the add-entry form and the JSON API."""
    conn, key = context["conn"], context["key"]
    return format_html(
        _LINKS,
        dlq=format_html('<a class="button warn" href="{}">Dead-letter view ›</a>', links.dlq_url(conn, key))
        if context.get("dlq")
        else "",
        page=context["stream_page"],
        api=context["api_url"],
    )


_FACTS = """<section class="facts">
  <div><span class="label" title="XLEN read live when this page was made; the charts show snapshots">Length, live now</span><span class="value">{length}</span><time class="small muted">read {now} UTC</time></div>
  <div><span class="label">Entries added</span><span class="value">{added}</span></div>
  <div><span class="label">Newest</span><span class="value mono small">{last}</span>{last_time}</div>
  <div><span class="label">Oldest</span><span class="value mono small">{first}</span>{first_time}</div>
  <div><span class="label">Last generated ID</span><span class="value mono small">{generated}</span>{generated_time}</div>
  <div><span class="label" title="Read live when this page was made, with the length">Pending (all groups), live now</span><span class="value">{pending}</span></div>
  <div><span class="label" title="The largest lag among the groups: entries not yet delivered to the slowest group">Lag</span><span class="value lag-cell" data-fact="stream-lag">{lag}</span></div>
</section>"""


def _id_and_time(entry_id: str | None, *, when_timed: bool = False) -> tuple[str, SafeString | str]:
    """An ID fact's value ("—" without one) and the ``<time>`` of the ID, shown when there is an ID or,
    ``when_timed``, when the ID has a time (the last generated ID may be 0-0)."""
    moment = idtime_text(entry_id) if entry_id else ""
    shown = moment if when_timed else entry_id
    return entry_id or "—", format_html('<time class="small muted">{} UTC</time>', moment) if shown else ""


@register.simple_tag(takes_context=True)
def stream_facts(context: template.Context) -> SafeString:
    """The stream's facts: its length and pending count read live (with the clock), entries added, the
    newest, oldest and last generated IDs with their times, and the largest lag of its groups."""
    info: StreamInfo = context["info"]
    health = context.get("health")
    last, last_time = _id_and_time(info.last_id)
    first, first_time = _id_and_time(info.first_id)
    generated, generated_time = _id_and_time(info.last_generated_id, when_timed=True)
    return format_html(
        _FACTS,
        length=localize(info.length),
        now=time_now(),
        added="unknown" if info.entries_added is None else localize(info.entries_added),
        last=last,
        last_time=last_time,
        first=first,
        first_time=first_time,
        generated=generated,
        generated_time=generated_time,
        pending=localize(info.pending),
        lag=lag_figure(
            info.lag,
            groups=len(info.groups),
            of="stream",
            unknown=info.lag_unknown_groups,
            version=getattr(health, "redis_version", None),
        ),
    )


_EXPORT_FORM = """
<h2>Export</h2>
<form method="post" action="{url}export/" class="panel" id="export-form">
  {csrf}
  <p class="small muted">Download a range of <span class="mono">{key_text}</span> (both ends included) as NDJSON, CSV or Parquet. A big range (over {stream_max} entries) is written by a background job whose page links the file.</p>
  <div class="filters">
    <label>From <input type="text" name="from" class="mono" size="24" value="-" placeholder="ID, 2026-11-22T10:00Z or -"></label>
    <label>to <input type="text" name="to" class="mono" size="24" value="+" placeholder="ID, date-time or +"></label>
    <label>Format <select name="format">
      <option value="ndjson">NDJSON</option>
      <option value="csv">CSV</option>
      <option value="parquet">Parquet</option>
    </select></label>
    <label>Matching <input type="text" name="q" class="mono" size="30" value="{q}" placeholder="search query (optional)"></label>
  </div>
  <p><button type="submit" id="export-download">Download</button>
     <button type="submit" class="subtle button" id="export-job" formaction="{url}export/job/">Export in background</button></p>
</form>
"""


@register.simple_tag(takes_context=True)
def export_form(context: template.Context) -> SafeString:
    """The "Export" form: a range of the page's stream (``conn``, ``key``, ``key_text``) as NDJSON, CSV or
    Parquet, matching the page's search query, and the size over which an export runs as a background job."""
    csrf: Any = CsrfTokenNode().render(context)
    return format_html(
        _EXPORT_FORM,
        url=links.stream_url(context["conn"], context["key"]),
        csrf=csrf,
        key_text=context["key_text"],
        stream_max=localize(settings.BUSCONSOLE_EXPORT_STREAM_MAX),
        q=context["request"].GET.get("q", ""),
    )


_SEARCH_FORM = """

<div class="page-head" id="search">
  <form method="get" action="#search" class="filters compact search-form">
    <label>Search <input type="search" name="q" value="{q}" size="48" maxlength="2000" class="mono" placeholder='data.customer.id == 42, error.contains("timeout") or plain text'></label>
    <label>from <input type="text" name="from" value="{start}" size="16" class="mono" placeholder="ID or time"></label>
    <label>to <input type="text" name="to" value="{end}" size="16" class="mono" placeholder="ID or time"></label>
    <select name="direction" aria-label="Direction"><option value="asc"{oldest}>oldest first</option><option value="desc"{newest}>newest first</option></select>
    {limit}
    <button type="submit">Search</button>
    {clear}
  </form>
  <details class="small search-help"><summary>How search works</summary>
    {help}
    <p>One search scans at most 100,000 entries or 2 seconds and says how far it got; <em>Continue</em> picks up where it stopped.</p>
  </details>
</div>
{results}
"""
_SEARCH_RESULTS = """
<section id="search-results" class="panel search-results" aria-live="polite">
  <p id="search-status" class="search-status" role="status">Searching…</p>
  <div class="search-hits"><div class="search-more" hx-get="{url}" hx-trigger="load" hx-swap="outerHTML"><a class="small" href="{url}">Show the results</a></div></div>
</section>
"""
#: The search language's help, kept as a template because the live tail's filter help includes it too.
SEARCH_HELP = "streams_app/_search_box.html#query-syntax"


@functools.lru_cache(maxsize=4)
def _help_text(help_template: Any) -> SafeString:
    """The help's markup: fixed text, rendered once per loaded template (a reloaded template is a new
    object, so an edited help shows)."""
    return mark_safe(help_template.render(Context()))  # noqa: S308 - a template's own output, autoescaped


@register.simple_tag(takes_context=True)
def search_box(context: template.Context, search_page: str) -> SafeString:
    """The search box of the stream and DLQ pages, a GET form filled from the page's query string (the
    query, its range, its direction and the limit), and when there is a query, the results' place that
    htmx fills from ``search/`` (a plain link without JavaScript)."""
    params = context["request"].GET
    q, limit, newest_first = params.get("q") or "", params.get("limit") or "", params.get("direction") == "desc"
    return format_html(
        _SEARCH_FORM,
        q=q,
        start=params.get("from") or "",
        end=params.get("to") or "",
        oldest="" if newest_first else mark_safe(" selected"),
        newest=mark_safe(" selected") if newest_first else "",
        limit=format_html('<input type="hidden" name="limit" value="{}">', limit) if limit else "",
        clear=format_html('<a href="{}">Clear</a>', search_page) if q else "",
        help=_help_text((context.template.engine if context.template else Engine.get_default()).get_template(SEARCH_HELP)),
        results=format_html(_SEARCH_RESULTS, url=f"{search_page}search/?{params.urlencode()}") if q else "",
    )


@register.simple_tag(takes_context=True)
def entries_pager(context: template.Context) -> SafeString:
    """The entries' "newer" and "older" links: the page's exclusive cursors (``page.prev``, ``page.next``)
    as ``after`` or ``before`` by the order shown, the rest of the query string kept."""
    page, ascending = context["page"], context["params"]["order"] == "asc"
    prev = next_ = ""
    if page.prev:
        cursor = {"before": page.prev, "after": None} if ascending else {"after": page.prev, "before": None}
        prev = format_html('<a rel="prev" href="{}">‹ {}</a>', query(context, **cursor, at=None), "Older" if ascending else "Newer")
    if page.next:
        cursor = {"after": page.next, "before": None} if ascending else {"before": page.next, "after": None}
        next_ = format_html('<a rel="next" href="{}">{} ›</a>', query(context, **cursor, at=None), "Newer" if ascending else "Older")
    return format_html("{}\n    {}", prev, next_)
