"""Turn the access layer's dataclasses into what pages and the JSON API show.

One place decides how an entry, a stream or a group looks, so the page, its htmx partial and the
API agree. Everything here is data: templates escape it, the API serialises it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings

from eventbus.decoding import DecodedField, decode_fields
from eventbus.text import display_text, escape_bidi, id_ms, id_time
from streams_app.alerts.models import FAMILY_KINDS, Alert, AlertRule
from streams_app.redis_ops import conventions
from streams_app.redis_ops.reads.groups import GROUP_SORTS, ranked
from streams_app.redis_ops.types import (
    Entry,
    GroupInfo,
    PendingEntry,
    PendingIdle,
    PendingSummary,
    StreamInfo,
    StreamSummary,
)
from streams_app.views import links

#: Fields longer than this are cut in the one-line summary of an entry.
SUMMARY_CHARS = 160
#: A field the bus (or the console's requeue and replay) writes about the event's handling starts so
#: (``eventbus/keys.py``: ``_retries``, ``_group``, ``_unique``, ``_first_id``, ``_failed_id``,
#: ``_failed_at``; ``eventbus/conventions.py``: ``_requeued_from``, ``_replayed_from``).
BUS_FIELD_PREFIX = b"_"
#: Badges of bus fields a search result shows at most, and the characters of each value.
BUS_FIELDS_MAX, BUS_FIELD_CHARS = 12, 48


@dataclass(frozen=True, slots=True)
class EntryView:
    id: str
    entry: Entry
    fields: list[DecodedField]
    summary: str
    url: str
    conn: str
    key: bytes
    #: The time in the ID, UTC to the millisecond (``2026-01-01 00:00:00.123``); empty for an ID without one.
    time_text: str

    @property
    def bus_fields(self) -> list[tuple[str, str]]:
        """The bus's own fields of the entry (``_retries``, ``_group``, ``_requeued_from``, ``_first_id``,
        ...: every field named with a leading ``_``, as the event bus and the console's requeue and replay
        write them), as (name, value) for a search result's badges, at most :data:`BUS_FIELDS_MAX`."""
        out = [
            (display_text(name), _cut(display_text(value[: BUS_FIELD_CHARS * 4]), BUS_FIELD_CHARS))
            for name, value in self.entry.fields
            if name.startswith(BUS_FIELD_PREFIX)
        ]
        return out[:BUS_FIELDS_MAX]


def entry_view(conn: str, key: bytes, entry: Entry) -> EntryView:
    return _entry_view(conn, key, entry, links.entry_url(conn, key, entry.id))


def entry_views(conn: str, key: bytes, entries: Sequence[Entry]) -> list[EntryView]:
    """:func:`entry_view` of each of a page's entries, the stream's part of their links built once."""
    url_of = links.entry_urls(conn, key)
    return [_entry_view(conn, key, entry, url_of(entry.id)) for entry in entries]


def _entry_view(conn: str, key: bytes, entry: Entry, url: str) -> EntryView:
    fields = decode_fields(list(entry.fields))
    summary = "  ".join(f"{f.name}={_oneline(f)}" for f in fields[:6])
    if len(summary) > SUMMARY_CHARS:
        summary = summary[: SUMMARY_CHARS - 1] + "…"
    return EntryView(
        id=entry.id, entry=entry, fields=fields, summary=summary,
        url=url, conn=conn, key=key, time_text=_id_time_text(entry.id),
    )


#: The first millisecond past the year 9999, where datetime (and :func:`id_time`'s clamp) ends.
_PAST_9999_MS = 253_402_300_800_000


def _id_time_text(entry_id: str) -> str:
    """The time in the ID as datetime's ``isoformat(" ", "milliseconds")`` writes it, UTC. By ``gmtime``
    and one format on every row of a page: making a datetime and formatting it cost about half again as
    much; IDs past the year 9999 take datetime's way, which clamps them."""
    ms = id_ms(entry_id)
    if ms is None:
        return ""
    if ms >= _PAST_9999_MS:
        return id_time(ms).replace(tzinfo=None).isoformat(" ", "milliseconds")
    t = time.gmtime(ms // 1000)
    # One %-format: half the time of the f-string with seven format specifiers.
    return "%04d-%02d-%02d %02d:%02d:%02d.%03d" % (t[0], t[1], t[2], t[3], t[4], t[5], ms % 1000)  # noqa: UP031


def _oneline(field: DecodedField, chars: int = SUMMARY_CHARS) -> str:
    # A JSON value is shown compact from its data, which keeps bidi controls: escape them as ``pretty`` does.
    text = field.decoded.pretty if field.decoded.format != "json" else escape_bidi(_compact(field.decoded.value))
    return " ".join(text.split())[:chars]


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


#: Bytes of each field decoded for a row's preview: enough for a line, however big the payload.
PREVIEW_FIELD_BYTES = 1024
#: The field that names an event's type (the event bus's, docs/architecture.md#the-buss-entries).
TYPE_FIELD = b"type"


@dataclass(frozen=True, slots=True)
class RowPreview:
    """What a pending row or a dead letter's row says of its message: its ``type``
    field (None without one) and the start of its other fields decoded (``text``), each cut to
    ``BUSCONSOLE_PREVIEW_CHARS`` with an ellipsis; ``deleted``: the message is no longer in the stream.
    Built from fields the reader's mask already applied to; templates escape it, the API serialises it."""

    type: str | None
    text: str
    deleted: bool = False


DELETED = RowPreview(type=None, text="", deleted=True)


def row_preview(fields: Sequence[tuple[bytes, bytes]] | None) -> RowPreview:
    """The preview of a message's ``fields`` (None: deleted from the stream)."""
    if fields is None:
        return DELETED
    limit = settings.BUSCONSOLE_PREVIEW_CHARS
    type_text = next(
        (_cut(display_text(value[: limit * 4]), limit) for name, value in fields if name == TYPE_FIELD and value),
        None,
    )
    parts: list[str] = []
    for field in decode_fields([f for f in fields if f[0] != TYPE_FIELD], limit=PREVIEW_FIELD_BYTES):
        parts.append(f"{field.name}={_oneline(field, limit)}")
        if sum(map(len, parts)) >= limit:  # enough for the line: the rest would be cut anyway
            break
    return RowPreview(type=type_text, text=_cut("  ".join(parts), limit))


def pending_previews(messages: Sequence[Entry | None]) -> list[RowPreview]:
    """The preview of each pending row's message, as :func:`~streams_app.redis_ops.reads.pending.pending_page_messages`
    read and masked it (None: deleted)."""
    return [row_preview(None if m is None else m.fields) for m in messages]


def preview_json(preview: RowPreview) -> dict | None:
    """A row's preview for the API: null for a deleted message."""
    return None if preview.deleted else {"type": preview.type, "text": preview.text}


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def key_text(key: bytes) -> str:
    return display_text(key)


def dlq_convention(key: bytes) -> str | None:
    kind = conventions.detect_dlq(key)
    return kind.convention if kind else None


# ---------------------------------------------------------------- JSON shapes (docs/api.md)


def entry_json(conn: str, key: bytes, entry: Entry) -> dict:
    decoded = decode_fields(list(entry.fields))
    return {
        "id": entry.id,
        "fields": {f.name: _field_text(f) for f in decoded},
        "decoded": [
            {
                "name": f.name,
                "format": f.decoded.format,
                "value": f.decoded.value,
                "size": f.decoded.size,
                "truncated": f.decoded.truncated,
                **({"raw_url": links.raw_field_url(conn, key, entry.id, f.index)} if f.decoded.truncated else {}),
            }
            for f in decoded
        ],
    }


def _field_text(field: DecodedField) -> str:
    if field.decoded.format in ("text", "json"):
        # Bidi controls escaped as in ``pretty``; inside a JSON string ``\u202e`` is the same character.
        return field.decoded.pretty if field.decoded.format == "text" else escape_bidi(_compact(field.decoded.value))
    return field.decoded.pretty


def group_json(group: GroupInfo) -> dict:
    return {
        "name": display_text(group.name),
        "consumers": group.consumers,
        "pending": group.pending,
        "last_delivered_id": group.last_delivered_id,
        "entries_read": group.entries_read,
        "lag": group.lag,
    }


def stream_summary_json(conn: str, summary: StreamSummary) -> dict:
    return {
        "key": display_text(summary.key),
        "url": links.stream_url(conn, summary.key),
        "api_url": links.api_stream_url(conn, summary.key),
        "length": summary.length,
        "first_id": summary.first_id,
        "last_id": summary.last_id,
        "groups": summary.groups,
        "pending": summary.pending,
        "is_dlq": conventions.detect_dlq(summary.key) is not None,
    }


def lag_json(lag: int | None, *, groups: int, unknown: int) -> dict:
    """A stream's lag for the API: the largest a group reports (a lower bound when ``lag_exact`` is false
    because ``lag_unknown_groups`` groups' lags Redis cannot tell; null when none reports one)."""
    return {"lag": lag, "lag_exact": groups > 0 and unknown == 0, "lag_unknown_groups": unknown}


def stream_info_json(conn: str, info: StreamInfo) -> dict:
    return {
        "key": display_text(info.key),
        "url": links.stream_url(conn, info.key),
        "length": info.length,
        "first_id": info.first_id,
        "last_id": info.last_id,
        "last_generated_id": info.last_generated_id,
        "entries_added": info.entries_added,
        "max_deleted_entry_id": info.max_deleted_entry_id,
        "is_dlq": conventions.detect_dlq(info.key) is not None,
        **lag_json(info.lag, groups=len(info.groups), unknown=info.lag_unknown_groups),
        **_first_groups(conn, info),
    }


def _first_groups(conn: str, info: StreamInfo) -> dict:
    """The first page of the stream's groups, most pending first, and where the rest are.

    A stream can have thousands of groups; the stream's own reply stays small and the groups endpoint
    pages through all of them (same order, same rows).
    """
    page = ranked(info.groups, sorts=GROUP_SORTS)
    return {
        "groups": [group_json(g) for g in page.rows],
        "groups_total": page.total,
        "groups_url": links.api_stream_url(conn, info.key) + "groups/",
    }


def pending_idle_json(figure: PendingIdle | None) -> dict | None:
    """The group's longest pending idle time (API ``summary.longest_idle``); ``exact`` false: a lower bound."""
    return None if figure is None else {"id": figure.id, "idle_ms": figure.idle_ms, "exact": figure.exact}


def pending_json(
    summary: PendingSummary,
    entries: tuple[PendingEntry, ...],
    nxt: str | None,
    previews: Sequence[RowPreview],
) -> dict:
    return {
        "summary": {
            "count": summary.count,
            "min_id": summary.min_id,
            "max_id": summary.max_id,
            "consumers": {display_text(name): n for name, n in summary.consumers},
        },
        "entries": [
            {
                "id": e.id,
                "consumer": display_text(e.consumer),
                "idle_ms": e.idle_ms,
                "deliveries": e.deliveries,
                "exists": e.exists,
                "preview": preview_json(preview),
            }
            for e, preview in zip(entries, previews, strict=True)
        ],
        "next": nxt,
    }


def alert_url(alert: Alert) -> str:
    """The page of what the alert is about: the group's page, else the stream's (or the DLQ's); a family's
    members (the families page when the glob's text is not its exact bytes, or too long for a path)."""
    key = bytes(alert.target_key)
    if alert.rule.kind in FAMILY_KINDS:
        seg = links.segment(key)
        exact = "\\x" not in alert.target_text and len(seg) <= links.LONG_SEGMENT
        return f"/c/{alert.connection}/families/{seg}/" if exact else f"/c/{alert.connection}/families/"
    if alert.target_group_name is not None:
        return links.group_url(alert.connection, key, bytes(alert.target_group_name))
    if alert.rule.kind == AlertRule.Kind.DLQ_GROWTH:
        return links.dlq_url(alert.connection, key)
    return links.stream_url(alert.connection, key)
