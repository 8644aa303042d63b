"""Turn the access layer's dataclasses into what pages and the JSON API show.

One place decides how an entry, a stream or a group looks, so the page, its htmx partial and the
API agree. Everything here is data: templates escape it, the API serialises it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from streams_app.alerts.models import Alert, AlertRule
from streams_app.masking.apply import Masker
from streams_app.redis_ops import conventions, reads
from streams_app.redis_ops.decoding import DecodedField, decode_fields, display_text, escape_bidi
from streams_app.redis_ops.ids import id_ms, id_time
from streams_app.redis_ops.reads import GROUP_SORTS, ranked
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


def entry_view(conn: str, key: bytes, entry: Entry) -> EntryView:
    fields = decode_fields(list(entry.fields))
    summary = "  ".join(f"{f.name}={_oneline(f)}" for f in fields[:6])
    if len(summary) > SUMMARY_CHARS:
        summary = summary[: SUMMARY_CHARS - 1] + "…"
    return EntryView(
        id=entry.id, entry=entry, fields=fields, summary=summary,
        url=links.entry_url(conn, key, entry.id), conn=conn, key=key, time_text=_id_time_text(entry.id),
    )


def _id_time_text(entry_id: str) -> str:
    ms = id_ms(entry_id)
    return "" if ms is None else id_time(ms).replace(tzinfo=None).isoformat(" ", "milliseconds")


def _oneline(field: DecodedField) -> str:
    # A JSON value is shown compact from its data, which keeps bidi controls: escape them as ``pretty`` does.
    text = field.decoded.pretty if field.decoded.format != "json" else escape_bidi(_compact(field.decoded.value))
    return " ".join(text.split())[:SUMMARY_CHARS]


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


#: Characters of the payload a pending row shows when the entry has no ``type`` field.
PENDING_PREVIEW_CHARS = 80
#: Bytes of each field decoded for that preview: enough for a line, however big the payload.
PENDING_PREVIEW_BYTES = 1024
#: The field that names an event's type (the event bus's, SPEC section 5).
TYPE_FIELD = b"type"


@dataclass(frozen=True, slots=True)
class PendingPreview:
    """What a pending row says of its message: ``kind`` is ``type`` (the entry's type field),
    ``payload`` (the start of its decoded fields) or ``deleted`` (no longer in the stream)."""

    kind: str
    text: str

    @property
    def deleted(self) -> bool:
        return self.kind == "deleted"


def pending_preview(entry: Entry | None) -> PendingPreview:
    """The type field when the entry has one, else a short preview of its decoded payload."""
    if entry is None:
        return PendingPreview("deleted", "deleted")
    for name, value in entry.fields:
        if name == TYPE_FIELD and value:
            return PendingPreview("type", _cut(display_text(value[: PENDING_PREVIEW_CHARS * 4])))
    fields = decode_fields(list(entry.fields), limit=PENDING_PREVIEW_BYTES)
    return PendingPreview("payload", _cut("  ".join(f"{f.name}={_oneline(f)}" for f in fields[:4])))


def pending_previews(
    conn: str, key: bytes, entries: Sequence[PendingEntry], *, masker: Masker
) -> list[PendingPreview]:
    """:func:`pending_preview` of each pending entry, read in ONE pipelined round trip for the page
    (:func:`streams_app.redis_ops.reads.entries_at`), masked by ``masker`` (:mod:`streams_app.masking`)."""
    found = reads.entries_at(conn, key, [p.id for p in entries], mask=masker.entry)
    return [pending_preview(found.get(p.id)) for p in entries]


def _cut(text: str) -> str:
    return text if len(text) <= PENDING_PREVIEW_CHARS else text[: PENDING_PREVIEW_CHARS - 1] + "…"


def key_text(key: bytes) -> str:
    return display_text(key)


def dlq_convention(key: bytes) -> str | None:
    kind = conventions.detect_dlq(key)
    return kind.convention if kind else None


# ---------------------------------------------------------------- JSON shapes (SPEC section 4)


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


def pending_json(summary: PendingSummary, entries: tuple[PendingEntry, ...], nxt: str | None) -> dict:
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
            }
            for e in entries
        ],
        "next": nxt,
    }


def alert_url(alert: Alert) -> str:
    """The page of what the alert is about: the group's page, else the stream's (or the DLQ's)."""
    key = bytes(alert.target_key)
    if alert.target_group_name is not None:
        return links.group_url(alert.connection, key, bytes(alert.target_group_name))
    if alert.rule.kind == AlertRule.Kind.DLQ_GROWTH:
        return links.dlq_url(alert.connection, key)
    return links.stream_url(alert.connection, key)
