"""Template filters and tags for stream IDs, durations, byte strings and console URLs."""

from __future__ import annotations

from datetime import datetime

from django import template

from streams_app.alerts.models import Alert
from streams_app.metrics.charts import format_duration_ms
from streams_app.redis_ops.decoding import display_text
from streams_app.redis_ops.ids import id_ms, id_time
from streams_app.views import links, presenters

register = template.Library()


@register.filter
def idtime(entry_id: str | None) -> datetime | None:
    """The time an entry ID was generated (its millisecond part)."""
    ms = id_ms(entry_id)
    return None if ms is None else id_time(ms)


@register.filter
def duration_ms(ms: int | None) -> str:
    """``93784000`` -> ``1d 2h``: idle times at a glance (two largest units)."""
    if ms is None:
        return "unknown"
    return format_duration_ms(int(ms))


@register.filter
def text(value: bytes | str | None) -> str:
    """Bytes as text: UTF-8, other bytes as \\xNN. Still autoescaped by the template."""
    if value is None:
        return ""
    return display_text(value) if isinstance(value, bytes) else str(value)


@register.filter
def seg(value: bytes | str) -> str:
    return links.segment(value)


@register.filter
def keyseg(key: bytes) -> str:
    """A stream key's segment as its links carry it: by digest when too long for a URL."""
    return links.key_segment(key)


@register.simple_tag
def stream_url(conn: str, key: bytes) -> str:
    return links.stream_url(conn, key)


@register.simple_tag
def group_url(conn: str, key: bytes, group: bytes) -> str:
    return links.group_url(conn, key, group)


@register.simple_tag
def entry_url(conn: str, key: bytes, entry_id: str) -> str:
    return links.entry_url(conn, key, entry_id)


@register.simple_tag
def raw_field_url(conn: str, key: bytes, entry_id: str, index: int) -> str:
    return links.raw_field_url(conn, key, entry_id, index)


@register.simple_tag(takes_context=True)
def query(context, **changes) -> str:
    """The current query string with some parameters changed (None removes one)."""
    params = context["request"].GET.copy()
    for name, value in changes.items():
        params.pop(name, None)
        if value not in (None, ""):
            params[name] = value
    encoded = params.urlencode()
    return f"?{encoded}" if encoded else "?"


@register.simple_tag
def dlq_url(conn: str, key: bytes) -> str:
    """The dead-letter page of the DLQ ``key``."""
    return links.dlq_url(conn, key)


@register.filter
def alert_url(alert: Alert) -> str:
    """The page of what an alert is about (``{{ alert|alert_url }}``)."""
    return presenters.alert_url(alert)


@register.filter
def can_act(role: str, needed: str = "operator") -> bool:
    """Whether a role (``console_role``) may press operator buttons (``|can_act``) or admin ones
    (``|can_act:"admin"``); only a hint for the page, the server checks again."""
    if needed == "admin":
        return role == "admin"
    return role in ("operator", "admin")


@register.filter
def msdate(ms: int | None) -> datetime | None:
    """Milliseconds since the epoch as a UTC datetime (a DLQ entry's failed-at)."""
    if ms is None:
        return None
    return id_time(int(ms))
