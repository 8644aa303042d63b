"""Parts of the stream and DLQ pages built in Python: ``{% load stream_parts %}`` then ``{% stream_facts %}``
(the stream page's facts) and ``{% export_form %}`` (the export form of the stream and DLQ pages).

Each was template markup on every stream page: the facts some thirty nodes (a filter or an ``if`` per
value), the export form an inclusion tag, with a context and a template render of its own for markup
that is almost all fixed text. Here the fixed text is a format string and every value goes through
:func:`django.utils.html.format_html`, which escapes it as autoescaping does (``conditional_escape``); numbers
are localised first, as a template shows them (:func:`django.utils.formats.localize`). The CSRF field is
Django's own tag's output. The pages' HTML is held byte for byte by
``tests/console/views/test_stream_page_one_read.py`` and ``tests/console/views/test_stream_page_cheap.py``.
"""

from __future__ import annotations

from typing import Any

from django import template
from django.conf import settings
from django.template.defaulttags import CsrfTokenNode
from django.utils.formats import localize
from django.utils.html import format_html
from django.utils.safestring import SafeString

from streams_app.redis_ops.types import StreamInfo
from streams_app.templatetags.console import idtime_text, time_now
from streams_app.templatetags.figures import lag_figure
from streams_app.views import links

register = template.Library()

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
