"""Figures Redis may not be able to tell (a group's lag, a consumer's inactive time), shown the same way
on every page: the number when there is one, else a visible marker whose hover text says why Redis
cannot tell and what makes the figure known again. Never a 0 or a blank standing in for "unknown".
The overview's memory is written here too, in Redis's own ``used_memory_human`` style (``redis_bytes``,
``server_memory``): the access layer hands out bytes.

``{% load figures %}`` then ``{% lag_figure g.lag version=health.redis_version %}`` (a group),
``{% lag_figure s.lag groups=s.groups of="stream" unknown=s.lag_unknown_groups version=health.redis_version %}``
(a stream: its largest lag; when some group's is unknown, the largest known one as a lower bound, "≥ 4012,
1 group unknown", see :func:`streams_app.redis_ops.types.groups_lag`) and
``{% inactive_figure c.inactive_ms version=health.redis_version %}``. ``version`` is the server's
``redis_version`` (the page's ``health``), which tells "this server is too old to report it" from
"Redis cannot count it now".

The tags return their markup built with ``format_html`` (every value escaped) rather than rendering a
template per figure: the stream and group pages show one in each of their 50 rows, and an inclusion
tag costs a template render per cell, several times the figure itself.
"""

from __future__ import annotations

import re
from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from streams_app.metrics.charts import format_duration_ms
from streams_app.redis_ops.reads.server import ServerOverview

register = template.Library()

#: Why a group's lag is unknown on Redis 7.0+ (docs/architecture.md#lag-redis-cannot-tell), and what makes it known again.
LAG_UNKNOWN = (
    "Lag unknown: Redis cannot count the entries between the group's position and the end of the stream. "
    "The group was moved with XGROUP SETID to an arbitrary ID without ENTRIESREAD, or entries in that range "
    "were deleted (XDEL). It becomes known again when the group reads past the last entry, or after a rewind "
    "with ENTRIESREAD (the console's rewind sets it)."
)
LAG_UNKNOWN_STREAM = (
    "Lag unknown: Redis cannot count the lag of at least one group of this stream, so the stream's largest lag "
    "is unknown too (not 0). " + LAG_UNKNOWN.removeprefix("Lag unknown: ")
)
LAG_BOUND = (
    "At least this much: Redis cannot count the lag of {unknown} of this stream's {groups} groups, so the largest "
    "lag it does count is a lower bound of the stream's. " + LAG_UNKNOWN.removeprefix("Lag unknown: ")
)
LAG_TOO_OLD = "Lag n/a: Redis reports a group's lag only from 7.0 (XINFO GROUPS has no lag field before)."
LAG_NO_GROUP = "No consumer group reads this stream: there is no lag to tell."
INACTIVE_TOO_OLD = (
    "Inactive n/a: XINFO CONSUMERS reports 'inactive' (the time since the consumer's last successful read) "
    "only from Redis 7.2; this server runs {version}. Idle (the time since its last attempt) is shown instead."
)
INACTIVE_NEVER = (
    "This consumer has never read an entry successfully (Redis reports -1): no inactive time yet."
)


def server_version(version: str | None) -> tuple[int, int] | None:
    """``"7.0.15"`` -> ``(7, 0)``; None when unknown or unreadable."""
    match = re.match(r"(\d+)\.(\d+)", version or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def _short(version: tuple[int, int] | None) -> str:
    return f"Redis {version[0]}.{version[1]}" if version else "this Redis"


def _figure(text: object, title: str = "", css: str = "", strong: bool = False) -> SafeString:
    """One figure: the value (bold when ``strong``), or a marker whose title says why it is missing,
    focusable so that a keyboard reaches the reason too."""
    if title:
        focus = mark_safe(' tabindex="0"') if css == "unknown-figure" else ""
        return format_html('<span class="{}" title="{}"{}>{}</span>\n', css, title, focus, text)
    if strong:
        return format_html("<strong>{}</strong>\n", text)
    return format_html("{}\n", text)


@register.simple_tag
def lag_figure(
    lag: int | None, *, version: str | None = None, groups: int = 1, of: str = "group", unknown: int = 0
) -> SafeString:
    """A lag cell: the number (bold when not 0), a lower bound "≥ n, k groups unknown" (a stream some of
    whose ``unknown`` groups' lags Redis cannot tell), or "unknown" / "n/a on Redis 6.2", with its reason."""
    return _figure(**_lag(lag, version=version, groups=groups, of=of, unknown=unknown))


def _lag(lag: int | None, *, version: str | None, groups: int, of: str, unknown: int = 0) -> dict[str, Any]:
    if groups == 0:
        return {"text": "—", "title": LAG_NO_GROUP, "css": "muted"}
    if lag is not None and of == "stream" and unknown > 0:
        return {
            "text": f"≥ {lag}, {unknown} group{'s' if unknown > 1 else ''} unknown",
            "title": LAG_BOUND.format(unknown=unknown, groups=groups),
            "css": "unknown-figure",
        }
    if lag is not None:
        return {"text": lag, "title": "", "css": "", "strong": lag > 0}
    parsed = server_version(version)
    if parsed is not None and parsed < (7, 0):
        return {"text": f"n/a on {_short(parsed)}", "title": LAG_TOO_OLD, "css": "unknown-figure"}
    return {
        "text": "unknown",
        "title": LAG_UNKNOWN_STREAM if of == "stream" else LAG_UNKNOWN,
        "css": "unknown-figure",
    }


@register.simple_tag
def inactive_figure(inactive_ms: int | None, *, version: str | None = None) -> SafeString:
    """An Inactive cell: the duration, "n/a on Redis 7.0" before 7.2, or "never" when the consumer never read."""
    return _figure(**_inactive(inactive_ms, version=version))


def _inactive(inactive_ms: int | None, *, version: str | None) -> dict[str, Any]:
    if inactive_ms is not None:
        return {"text": format_duration_ms(inactive_ms), "title": "", "css": ""}
    parsed = server_version(version)
    if parsed is None or parsed < (7, 2):
        return {
            "text": f"n/a on {_short(parsed)}",
            "title": INACTIVE_TOO_OLD.format(version=version or "an unknown version"),
            "css": "unknown-figure",
        }
    return {"text": "never", "title": INACTIVE_NEVER, "css": "unknown-figure"}


@register.filter
def redis_bytes(size: int) -> str:
    """``size`` bytes as Redis writes ``used_memory_human`` (``1.50M``): for a sum over a cluster's
    primaries, which no server writes for us."""
    value = float(size)
    for unit in ("B", "K", "M", "G", "T"):
        if value < 1024 or unit == "T":
            return f"{value:.2f}{unit}" if unit != "B" else f"{size}B"
        value /= 1024
    return f"{size}B"


@register.filter
def server_memory(facts: ServerOverview | None) -> str | None:
    """The overview's memory cell: a single server's own ``used_memory_human``, or the primaries' sum
    written the same way (None: not known, the page shows a dash)."""
    if not facts:
        return None
    if facts.nodes == 1 or facts.used_memory is None:
        return facts.used_memory_human
    return redis_bytes(facts.used_memory)
