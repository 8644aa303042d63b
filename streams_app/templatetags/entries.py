"""``{% entry_fields e %}``: an entry's decoded fields, as the stream page, the entry page and search
results show them (``e`` is a :class:`streams_app.views.presenters.EntryView`).

The markup is built here rather than in a template because it is the inner loop of the stream page: 50
entries of a few fields each made some 40 template nodes per entry, each resolving, localising and
escaping one value, and the page cost four times its JSON API. One function per field does the same
work for a tenth of it. Nothing reaches the page unescaped: every value (names, payloads, IDs, URLs)
goes through :func:`html.escape` with ``quote=True``, which is what :func:`django.utils.html.escape`
calls, without the lazy-string wrapper that costs more than the escaping. Only the literal markup
around the values is trusted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape

from django import template
from django.template.defaultfilters import filesizeformat
from django.utils.safestring import SafeString, mark_safe

from eventbus.decoding import DecodedField
from streams_app.templatetags.entry_times import fieldtime, is_time_name
from streams_app.views import links
from streams_app.views.presenters import EntryView

register = template.Library()


@register.simple_tag
def entry_rows(entries: list[EntryView], selectable: bool = False, revealing: bool = False) -> SafeString:
    """The ``<tr>`` of each entry in the stream page's entries table: the ID linking to the entry's page
    (after a checkbox for the delete form when ``selectable``), the time in the ID, the link to the event's
    journey (a cell of its own, so the ID's cell holds one link), and the one-line summary that opens
    onto :func:`entry_fields` (last: the column that takes the rest of the width). One tag for the whole page of rows: a tag per row
    costs as much in the template's loop as the row itself. The stream's part of the journey links is
    encoded once per stream, not once per row."""
    journeys: dict[tuple[str, bytes], Callable[[str], str]] = {}
    shown = _Shown()
    rows = []
    for e in entries:
        journey_of = journeys.get((e.conn, e.key))
        if journey_of is None:
            journey_of = journeys[e.conn, e.key] = links.journey_urls(e.conn, e.key)
        rows.append(_row(e, journey_of(e.id), selectable, revealing, shown))
    return mark_safe("".join(rows))  # noqa: S308 - escaped in _row


def _row(e: EntryView, journey: str, selectable: bool, revealing: bool, shown: _Shown) -> str:
    entry_id = escape(e.id)
    tick = (
        f'<input type="checkbox" name="ids" value="{entry_id}" form="entries-delete" aria-label="Select {entry_id}"> '
        if selectable
        else ""
    )
    return (
        f'\n      <tr>\n        <td class="mono nowrap">{tick}<a href="{escape(e.url)}">{entry_id}</a></td>'
        f'\n        <td class="nowrap small">{escape(e.time_text)}</td>'
        f'\n        <td class="small"><a class="journey-link" href="{escape(journey)}"'
        f' data-journey title="The journey of this entry\'s event">journey</a></td>'
        f'\n        <td>\n          <details>\n            <summary class="mono small">{escape(e.summary)}</summary>'
        f"\n            {_fields(e, entry_id, revealing, shown)}\n          </details>\n        </td>\n      </tr>"
    )


@register.simple_tag
def entry_fields(e: EntryView, revealing: bool = False) -> SafeString:
    """``<dl class="fields">``: per field its name, format, size and the time a timestamp-like field
    holds, a copy button, the decoded value in a ``<pre>`` and, when the value was cut, a link to the
    whole of it. ``revealing``: the page shows masked values (``?unmasked=1``), so the link asks for
    them too, or it would download the masked value (the download checks the role and audits again)."""
    return mark_safe(_fields(e, escape(e.id), revealing, _Shown()))  # noqa: S308 - every value is escaped in _field


@dataclass(slots=True)
class _Shown:
    """What one render of rows formats once: entries repeat their field names, formats and sizes."""

    sizes: dict[int, str] = field(default_factory=dict)
    #: (name, format) -> the field's heading up to its size, and whether the name is a timestamp's
    heads: dict[tuple[str, str], tuple[str, bool]] = field(default_factory=dict)


def _fields(e: EntryView, entry_id: str, revealing: bool, shown: _Shown) -> str:
    """:func:`entry_fields`'s markup, ``entry_id`` already escaped."""
    reveal = "&unmasked=1" if revealing else ""
    return '<dl class="fields">' + "".join(_field(e, entry_id, f, reveal, shown) for f in e.fields) + "\n</dl>"


def _field(e: EntryView, entry_id: str, f: DecodedField, reveal: str, shown: _Shown) -> str:
    decoded = f.decoded
    head = shown.heads.get((f.name, decoded.format))
    if head is None:
        fmt = escape(decoded.format)
        head = shown.heads[f.name, decoded.format] = (
            f'\n  <dt class="mono">{escape(f.name)} <span class="fmt fmt-{fmt}">{fmt}</span> ',
            is_time_name(f.name),
        )
    size = shown.sizes.get(decoded.size)
    if size is None:
        size = shown.sizes[decoded.size] = escape(filesizeformat(decoded.size))
    dom_id = f"field-{entry_id}-{f.index}"
    moment = fieldtime(f) if head[1] else None
    when = (
        f' <time class="small muted field-time" datetime="{moment.isoformat()}">'
        f"{moment.strftime('%Y-%m-%d %H:%M:%S.%f')[:-3]} UTC</time>"
        if moment is not None
        else ""
    )
    cut = (
        f'<p class="small warn-text">Shown: the first 64 KiB of {size}. <a href="'
        f'{escape(links.raw_field_url(e.conn, e.key, e.id, f.index) + reveal)}" download>Download the whole value</a></p>'
        if decoded.truncated
        else ""
    )
    return (
        f'{head[0]}<span class="muted small">{size}</span>{when}\n'
        f'    <button type="button" class="small subtle copy-button" data-copy="{dom_id}" hidden>Copy</button></dt>\n'
        f'  <dd>\n    <pre class="payload" id="{dom_id}">{escape(decoded.pretty)}</pre>{cut}\n  </dd>'
    )
